"""nacelle/_loggers.py: module loggers that import logging at their first use."""

import copy
import logging
import pickle
import subprocess
import sys
from pathlib import Path

from nacelle._loggers import get_logger

ROOT = Path(__file__).resolve().parent.parent


def test_a_deferred_logger_writes_through_the_logger_of_its_name(caplog):
    log = get_logger("nacelle.tests_loggers")
    with caplog.at_level(logging.DEBUG, logger="nacelle.tests_loggers"):
        assert log.isEnabledFor(logging.DEBUG)
        log.debug("one %s", 1)
        log.info("two")
        log.warning("three")
        log.error("four")
        try:
            raise ValueError("five")
        except ValueError:
            log.exception("five")
    records = [r for r in caplog.records if r.name == "nacelle.tests_loggers"]
    assert [r.getMessage() for r in records] == ["one 1", "two", "three", "four", "five"]
    assert records[-1].exc_info is not None
    # The caller is this test, not the stand-in.
    assert {r.pathname for r in records} == {__file__}


def test_a_deferred_logger_passes_for_the_logger_and_sets_attributes_on_it():
    log = get_logger("nacelle.tests_loggers.attributes")
    real = logging.getLogger("nacelle.tests_loggers.attributes")
    assert isinstance(log, logging.Logger)
    assert log.name == real.name
    assert repr(log) == repr(real)
    log.setLevel(logging.ERROR)
    assert real.level == logging.ERROR
    log.disabled = True
    assert real.disabled is True and log.disabled is True
    real.disabled = False
    assert log.disabled is False


def test_a_deferred_logger_survives_copy_and_pickle():
    log = get_logger("nacelle.tests_loggers.copied")
    for other in (copy.copy(log), copy.deepcopy(log), pickle.loads(pickle.dumps(log))):
        assert other.name == "nacelle.tests_loggers.copied"


def test_the_null_handler_is_on_the_package_logger_before_the_first_record():
    code = (
        "import sys, nacelle; assert 'logging' not in sys.modules\n"
        "from nacelle._loggers import get_logger\n"
        "log = get_logger('nacelle.somewhere')\n"
        "import logging\n"
        "assert not logging.getLogger('nacelle').handlers\n"
        "log.warning('unconfigured')\n"
        "print([type(h).__name__ for h in logging.getLogger('nacelle').handlers])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=str(ROOT), capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "['NullHandler']"
    # Without the NullHandler, logging's last resort would print the warning.
    assert out.stderr == ""


def test_importing_nacelle_after_logging_installs_the_null_handler_at_once():
    code = ("import logging, nacelle\n"
            "print([type(h).__name__ for h in logging.getLogger('nacelle').handlers])\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=str(ROOT), capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "['NullHandler']"
