"""``python -m kindling`` runs the CLI."""

from kindling.cli.main import main

main()
