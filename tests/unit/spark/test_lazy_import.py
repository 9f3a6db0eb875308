"""``tubemq_aio.spark`` loads pyspark only when ``TubeMQDataSource`` is asked for, and says which
extra to install when pyspark is missing. The cases about what is not imported run in a fresh
interpreter, where nothing has imported pyspark yet (``sys.modules["pyspark"] = None`` stands
for a missing pyspark)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest


def _run(code: str) -> None:
    """Run ``code`` in a fresh interpreter; fail with its output unless it exits 0."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_package_and_its_pyspark_free_modules_do_not_import_pyspark() -> None:
    _run(
        """
        import sys
        import tubemq_aio.spark
        from tubemq_aio.spark import _bridge, _offsets, _options
        assert "pyspark" not in sys.modules, sorted(m for m in sys.modules if "spark" in m)
        assert tubemq_aio.spark.__all__ == ["TubeMQDataSource"]
        try:
            from tubemq_aio.spark import TubeMQSink
        except ImportError as exc:
            assert "cannot import name 'TubeMQSink'" in str(exc), str(exc)
        else:
            raise AssertionError("an unknown name was imported")
        assert "pyspark" not in sys.modules  # nor by asking for an unknown name
        """
    )


def test_the_data_source_is_loaded_on_first_access_and_kept() -> None:
    from pyspark.sql.datasource import DataSource

    import tubemq_aio.spark
    from tubemq_aio.spark import TubeMQDataSource
    from tubemq_aio.spark.source import TubeMQDataSource as defined

    assert TubeMQDataSource is defined
    assert issubclass(TubeMQDataSource, DataSource)
    assert TubeMQDataSource.name() == "tubemq"
    assert vars(tubemq_aio.spark)["TubeMQDataSource"] is defined  # loaded once, then kept


def test_without_pyspark_the_data_source_names_the_spark_extra() -> None:
    _run(
        """
        import sys
        sys.modules["pyspark"] = None  # what a missing pyspark looks like to an import
        from tubemq_aio.spark import _options
        try:
            from tubemq_aio.spark import TubeMQDataSource
        except ModuleNotFoundError as exc:
            assert exc.name == "pyspark", exc.name
            assert "spark extra" in str(exc) and "pip install '.[spark]'" in str(exc), str(exc)
            assert isinstance(exc.__cause__, ModuleNotFoundError)
        else:
            raise AssertionError("no error without pyspark")
        """
    )


def test_an_unknown_name_is_an_attribute_error() -> None:
    import tubemq_aio.spark

    with pytest.raises(AttributeError, match="has no attribute 'DataSource'"):
        tubemq_aio.spark.DataSource  # type: ignore[attr-defined]  # noqa: B018
