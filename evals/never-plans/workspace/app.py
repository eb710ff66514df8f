NAME = "Foo"

print(f"{NAME} ready")
