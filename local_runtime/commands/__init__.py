"""CLI command groups, one module per feature, each with `register(subparsers)`."""
