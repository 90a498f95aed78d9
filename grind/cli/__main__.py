"""``python -m grind.cli``: the command line."""
from grind.cli import main

main()
