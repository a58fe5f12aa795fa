# The experiment suite: `python -m pytest experiments` runs every experiment's
# arms (each in a fresh process) and prints one results table at the end.
pytest_plugins = ["heaplab.pytest_plugin"]
