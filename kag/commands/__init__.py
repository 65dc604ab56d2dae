"""The commands: one module per command (or family of sub-commands), which parses the options, calls the library and renders; the private modules hold what commands share."""
