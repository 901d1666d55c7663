"""One module per `coli` subcommand.

Each module defines `register(subparsers)`, which adds its parser and sets
`func=run` (a callable taking the parsed args and returning an exit code).
cli.py discovers the modules here, so adding a command is adding a file.
"""
