"""Known models: the registry, provisioning of the embedded default, offline loading."""
