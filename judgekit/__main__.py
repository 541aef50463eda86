"""``python -m judgekit`` runs the CLI."""

from judgekit.cli import main

main()
