"""The tests' one home for helpers: what several test files share (fixtures' building blocks, the
checkout's paths, fault injection, the reference Kafka broker) and the programs the tests run in
subprocesses (``python -m support.NAME``, from ``tests/``). Fixtures themselves stay in the
``conftest.py`` files, where pytest finds them."""
