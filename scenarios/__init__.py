"""exsim scenarios package."""
