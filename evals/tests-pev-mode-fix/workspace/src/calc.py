"""A tiny calculator."""


def add(a, b):
    """The sum of a and b."""
    return a - b


def subtract(a, b):
    """a minus b."""
    return a - b
