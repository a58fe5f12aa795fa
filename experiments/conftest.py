# The experiment suite: `python -m pytest experiments` runs every experiment's
# arms (each in a fresh process) and prints the effects table at the end.
#
# The `lab` fixture and the tables come from heaplab's pytest plugin, which
# pytest loads through its entry point (pytest11: heaplab) once heaplab is
# installed.  With plugin autoloading off (PYTEST_DISABLE_PLUGIN_AUTOLOAD=1)
# and no `-p heaplab`, it is registered here instead.
import os
import sys

try:
    import heaplab.pytest_plugin
except ModuleNotFoundError as e:
    if e.name != "heaplab":
        raise
    # plain `python3 -m pytest experiments` after `make experiments`: heaplab
    # (and pytest) are in the project's virtual environment, not in python3
    venv = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".venv")
    hint = (f"run `{os.path.relpath(venv)}/bin/python -m pytest experiments ...`, or "
            f"`. {os.path.relpath(venv)}/bin/activate` first" if os.path.isdir(venv) else
            "`make experiments` makes .venv and installs it there; or `pip install .`")
    raise ModuleNotFoundError(f"heaplab is not installed for {sys.executable}: {hint}",
                              name=e.name) from None


def pytest_configure(config):
    pm = config.pluginmanager
    if not pm.is_registered(heaplab.pytest_plugin):
        pm.register(heaplab.pytest_plugin, "heaplab")   # its pytest_configure runs then
