"""The `qmd` commands, one module per group; each registers its grammar and handlers."""
