# The experiment suite: `python -m pytest experiments` runs every experiment's
# arms (each in a fresh process) and prints the effects table at the end.
#
# The `lab` fixture and the tables come from heaplab's pytest plugin, which
# pytest loads through its entry point (pytest11: heaplab) once heaplab is
# installed.  With plugin autoloading off (PYTEST_DISABLE_PLUGIN_AUTOLOAD=1)
# and no `-p heaplab`, it is registered here instead.
import heaplab.pytest_plugin


def pytest_configure(config):
    pm = config.pluginmanager
    if not pm.is_registered(heaplab.pytest_plugin):
        pm.register(heaplab.pytest_plugin, "heaplab")   # its pytest_configure runs then
