"""How the worker builds its Faust worker (no broker needed)."""

from __future__ import annotations

import logging

from streameval.settings import Settings


def test_no_spinner_turns_debug_records_on_at_warn_level(tmp_path: object) -> None:
    from streameval.agents.app import create_app
    from streameval.agents.worker import make_faust_worker

    settings = Settings(
        config="unused.yaml",
        redis_url="redis://127.0.0.1:1/0",
        kafka_bootstrap_servers="127.0.0.1:1",
        log_level="warn",
        data_dir=str(tmp_path),
    )

    async def never() -> object:
        raise AssertionError("not started in this test")

    worker = make_faust_worker(create_app(settings, never), settings)  # type: ignore[arg-type]
    logger = logging.getLogger("streameval-test-root")
    logger.setLevel(logging.WARNING)
    # Faust calls this while setting up the root logger; with its spinner it would set DEBUG here, and every
    # aiokafka debug line (one per message sent) would then build a log record
    worker.on_setup_root_logger(logger, logging.WARNING)
    assert logger.level == logging.WARNING
    assert not logger.isEnabledFor(logging.DEBUG)
