"""The two decoding engines every format test runs against (aiokafka's twin pattern)."""
import pytest

ENGINES = ["python", "accel"]
engine_param = pytest.mark.parametrize("engine", ENGINES)
