"""exsim store package."""
