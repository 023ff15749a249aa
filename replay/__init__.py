"""exsim replay package."""
