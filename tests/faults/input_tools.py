"""Tools of the bad-input and security fault tests."""
