def compute(x):
    return x * 2
