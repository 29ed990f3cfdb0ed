"""`python -m posttrain.cli`: the `posttrain` command, for an interpreter without the script."""

from posttrain.cli.app import main

main()
