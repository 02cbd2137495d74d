"""The two engines every format test runs against (aiokafka's twin pattern): ``kafkalog.engine``'s
names."""
import pytest

from kafkalog.engine import ENGINES as _NAMES

ENGINES = list(_NAMES)          # ["reference", "compiled"]
engine_param = pytest.mark.parametrize("engine", ENGINES)
