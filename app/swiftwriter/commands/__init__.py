"""CLI subcommands, one module each; every module offers `register(subparsers)`."""
