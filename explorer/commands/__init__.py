"""The click commands, one module per area; explorer.cli assembles them into the `explorer` group."""
