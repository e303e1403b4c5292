"""The SQLite-versus-PostgreSQL benchmark runs end to end on tiny sizes and prints every figure."""

from __future__ import annotations

import json

from tools.bench_postgres import main


def test_bench_postgres_prints_every_figure(capsys, postgres_server) -> None:
    main(["--commits", "3", "--writers", "1,2", "--writer-commits", "2", "--url", postgres_server.url])
    result = json.loads(capsys.readouterr().out)
    for system in ("icelog_sqlite", "icelog_postgresql", "pyiceberg_sqlcatalog_postgresql"):
        figure = result["append_latency_ms"][system]
        assert figure["rows"] == 30 and figure["first_3"]["n"] == 3 and figure["first_3"]["p50"] > 0
    for log in ("icelog_sqlite", "icelog_postgresql"):
        for writers in (1, 2):
            figure = result["commits_per_second_one_table"][log][str(writers)]
            assert figure["commits"] == figure["snapshots"] == 2 * writers and figure["rows"] == 20 * writers
