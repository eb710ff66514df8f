"""``python -m plan_lint …``."""

from plan_lint.cli import app

if __name__ == "__main__":
    app()
