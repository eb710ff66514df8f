from lib import compute

print(compute(21))
