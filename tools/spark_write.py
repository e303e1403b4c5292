"""DataFrame writes into icelog tables from Spark's executors: :func:`write` computes partition values with
Iceberg's own Spark functions, runs :func:`write_task` in each Python worker (icelog's Parquet writer), and
commits the files the job wrote through icelog as one snapshot.

Layer: tools (imports pyspark, icelog's engine and tools.spark's sessions; nothing imports tools). May touch the
JVM, the filesystem (the job's data files, the zip of icelog's sources shipped to the workers) and the table's
FileIO.

Usage::

    from tools.spark import session
    from tools.spark_write import write

    spark = session("/tmp/wh")
    write(spark.createDataFrame(rows), cat.load_table("db.events"))      # one snapshot
"""

from __future__ import annotations

import functools
import os
import pickle
import re
import shutil
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tools.spark import (
    ICEBERG_SPARK_CATALOG,
    REST_CATALOG,
    SOURCE_ROOT,
    after_stop,
    hadoop_catalog,
    remove_when_stopped,
    temp_folder,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from engine.table import Table
    from engine.state.table_state import Snapshot

WRITE_MODES = ("append", "overwrite", "dynamic_overwrite")
FUNCTION_CATALOG = "icelog_functions"
_KEY_PREFIX = "__icelog_p"
_FILE_COLUMN = "data_file"


def _quote(name: str) -> str:
    return ".".join(f"`{part.replace('`', '``')}`" for part in name.split("."))


def _function_catalog(spark: SparkSession) -> str:
    """An Iceberg catalog of the session whose ``system`` functions compute Iceberg's transforms: ``icelog`` when
    it is one, else a Hadoop catalog registered once on an empty scratch folder (functions need no table)."""
    for name in (REST_CATALOG, FUNCTION_CATALOG):
        if spark.conf.get(f"spark.sql.catalog.{name}", None) == ICEBERG_SPARK_CATALOG:
            return name
    folder = temp_folder("icelog-functions-")
    hadoop_catalog(spark, folder, name=FUNCTION_CATALOG)
    remove_when_stopped(spark, folder)
    return FUNCTION_CATALOG


def partition_expressions(spark: SparkSession, table_state: Any) -> list[str]:
    """Spark SQL expressions computing each partition field of the table's current spec with Iceberg's own
    functions (``<catalog>.system.bucket(n, col)``, ``truncate``, ``years``, ``months``, ``days``, ``hours``;
    identity is the column; void is null), in the spec's order."""
    from engine.errors import ValidationError
    from engine.model import transforms as tr

    catalog = _function_catalog(spark)
    out = []
    schema = table_state.schema
    for pf in table_state.spec.fields:
        column = _quote(schema.find_column_name(pf.source_id))
        t = pf.transform
        if isinstance(t, tr.Identity):
            out.append(column)
        elif isinstance(t, tr.Bucket):
            out.append(f"{catalog}.system.bucket({t.num_buckets}, {column})")
        elif isinstance(t, tr.Truncate):
            out.append(f"{catalog}.system.truncate({t.width}, {column})")
        elif isinstance(t, (tr.Year, tr.Month, tr.Day, tr.Hour)):
            name = {tr.Year: "years", tr.Month: "months", tr.Day: "days", tr.Hour: "hours"}[type(t)]
            out.append(f"{catalog}.system.{name}({column})")
        elif isinstance(t, tr.Void):
            out.append("CAST(NULL AS INT)")
        else:
            raise ValidationError(f"Cannot write with Spark: partition transform {t} of field {pf.name!r} has no "
                                  f"Spark function")
    return out


def _spark_type(t: Any) -> str | None:
    """The Spark SQL type a table column of Iceberg primitive type ``t`` holds (None: no Spark type, or nested)."""
    from engine.model import types as T

    simple = {T.BooleanType: "boolean", T.IntegerType: "int", T.LongType: "bigint", T.FloatType: "float",
              T.DoubleType: "double", T.DateType: "date", T.TimestampType: "timestamp_ntz",
              T.TimestamptzType: "timestamp", T.StringType: "string", T.UUIDType: "string",
              T.BinaryType: "binary", T.FixedType: "binary"}
    if isinstance(t, T.DecimalType):
        return f"decimal({t.precision},{t.scale})"
    return simple.get(type(t))


_INTEGERS = ("tinyint", "smallint", "int", "bigint")
_DECIMAL = re.compile(r"decimal\((\d+),(\d+)\)")


def _widens(source: str, target: str, *, to_text: bool = True) -> bool:
    """Whether a Spark cast from type ``source`` to ``target`` loses nothing: an integer to a wider one (or to
    text), float to double, a date to a timestamp, a decimal to one with as many integer and fraction digits."""
    if source in _INTEGERS and target in _INTEGERS:
        return _INTEGERS.index(source) <= _INTEGERS.index(target)
    if (source, target) in (("float", "double"), ("date", "timestamp"), ("date", "timestamp_ntz")):
        return True
    if to_text and target == "string" and source in _INTEGERS:
        return True
    a, b = _DECIMAL.fullmatch(source), _DECIMAL.fullmatch(target)
    if a and b:
        (p, s), (q, t) = (int(x) for x in a.groups()), (int(x) for x in b.groups())
        return t >= s and q - t >= p - s
    return False


def cast_partition_sources(df: DataFrame, table_state: Any) -> DataFrame:
    """``df`` with each partition source column cast to the table column's Spark type, as Spark casts what it
    writes to a table's types: the partition values are then computed from the values the files hold (from an int
    column, a string table column's bucket would hash the int). Only casts that lose nothing are made (Spark's
    own casts turn what does not fit into nulls); a nested source is left to the writer when it only widens a
    number (its partition values are the same).

    :raises ValidationError: naming the column, for a cast that could lose values; nothing is written
    """
    from pyspark.sql import functions as F

    from engine.errors import ValidationError

    schema = table_state.schema
    for pf in table_state.spec.fields:
        name = schema.find_column_name(pf.source_id)
        wanted = _spark_type(schema.find_field(pf.source_id).field_type)
        parts, holder = name.split("."), df.schema
        for part in parts[:-1]:
            field = next((f for f in holder.fields if f.name == part), None) if hasattr(holder, "fields") else None
            holder = field.dataType if field is not None else None
        found = next((f for f in holder.fields if f.name == parts[-1]), None) if hasattr(holder, "fields") else None
        have = found.dataType.simpleString() if found is not None else None
        if found is None or wanted is None or have == wanted:
            continue  # a missing optional column is null in every row; a type Spark lacks is the writer's to check
        nested = len(parts) > 1
        if nested and _widens(have, wanted, to_text=False) and not have.startswith("date"):
            continue  # a wider number partitions the same: the worker widens the data
        if nested or not _widens(have, wanted):
            raise ValidationError(f"Cannot write with Spark: partition source {name!r} is a {have}, the table's "
                                  f"column a {wanted}, and the cast could lose values: cast it first")
        df = df.withColumn(name, F.col(_quote(name)).cast(wanted))
    return df


def write(df: DataFrame, table: Table, mode: str = "append", where: str | None = None, *,
          branch: str = "main") -> Snapshot | None:
    """Write a DataFrame into an icelog table from Spark's executors, committed as ONE snapshot through icelog.

    ::

        write(df, cat.load_table("db.events"))                               # append
        write(df, t, mode="overwrite", where="category = 'a'")               # or the whole table
        write(df, t, mode="dynamic_overwrite")                               # the partitions in df

    Spark computes each row's partition values with Iceberg's own transform functions (so bucket is Iceberg's
    Murmur3 exactly), shuffles rows by them and sorts each task by them; each task writes Parquet files with the
    table's field ids into a per-job folder under the table's data folder (icelog's writer: metrics follow the
    table's metrics modes, files follow its sort order and target file size) and returns their descriptions; the
    driver commits them (``append_data_files``, ``overwrite_data_files`` or ``replace_partitions``). The job
    folder is staged before the job starts: files of a failed job are never committed and
    ``remove_orphan_files`` finds them; the files of a job whose commit is refused are removed.

    :param df: the rows; columns by name, a subset of the table's (missing optional columns are null)
    :param table: the icelog table (``engine.table.Table``)
    :param mode: ``append``, ``overwrite`` (the rows matching ``where``, or all rows) or ``dynamic_overwrite``
    :param where: the overwrite filter (icelog's filter syntax), only with ``mode="overwrite"``
    :param branch: the branch to commit to
    :returns: the new snapshot (None when ``df`` is empty and the mode is append)
    :raises ValidationError: a bad mode, a column not in the table, rows that do not fit the schema (raised by
        the failed job), files that do not fit the table; nothing is committed
    """
    from pyspark.sql import functions as F

    from engine.errors import ValidationError
    from engine.state.events import decode_file_change
    from projections import layout

    if mode not in WRITE_MODES:
        raise ValidationError(f"Cannot write with Spark: mode {mode!r} is not one of {', '.join(WRITE_MODES)}")
    if where is not None and mode != "overwrite":
        raise ValidationError(f"Cannot write with Spark: where= is only for mode='overwrite', not {mode!r}")
    state = table.state
    schema, spec = state.schema, state.spec
    known = {f.name for f in schema.columns}
    unknown = [c for c in df.columns if c not in known]
    if unknown:
        raise ValidationError(f"Cannot write with Spark: column(s) {', '.join(map(repr, unknown))} are not in "
                              f"{'.'.join(table.identifier)} ({', '.join(sorted(known))})")
    if where is not None:
        from engine.operations.row_delete import bind_filter

        bind_filter(state, where)  # a bad filter fails before the job, not after it
    df = cast_partition_sources(df, state)
    spark = df.sparkSession
    ship_sources(spark)
    keys = [F.expr(e).alias(f"{_KEY_PREFIX}{i}") for i, e in enumerate(partition_expressions(spark, state))]
    keyed = df.select(*[F.col(_quote(c)) for c in df.columns], *keys)
    if keys:
        key_names = [f"{_KEY_PREFIX}{i}" for i in range(len(keys))]
        keyed = keyed.repartition(*key_names).sortWithinPartitions(*key_names)
    job_folder = f"{layout.data_dir(state.location)}/spark-{uuid.uuid4().hex}"
    table.stage_folder(job_folder)
    slim = _writer_state(state)
    task = functools.partial(write_task, state_blob=pickle.dumps(slim), job_folder=job_folder, keys=len(keys),
                             s3_blob=pickle.dumps(table.catalog.io.s3))
    rows = _collect(keyed.mapInArrow(task, f"{_FILE_COLUMN} string"), job_folder)
    ptype = spec.partition_type(schema)
    files = [decode_file_change(r[_FILE_COLUMN], {spec.spec_id: ptype}).file for r in rows]
    # the job is done: when the commit is refused, its files are removed (a failed job's are left to
    # remove_orphan_files, as its killed tasks may still be writing when the job's error arrives)
    with table.removing_written_on_failure() as written:
        written += [f.file_path for f in files]
        if mode == "append":
            return table.append_data_files(files, branch=branch)
        if mode == "overwrite":
            return table.overwrite_data_files(files, where, branch=branch)
        return table.replace_partitions(files, branch=branch)


_SHIPPED: dict[int, str] = {}
#: held while a zip is made and added: two threads writing through one session ship it once (a second file of the
#: same name from another path is refused by Spark's file server on a cluster)
_SHIPPING = threading.Lock()
SOURCE_PACKAGES = ("storage", "engine", "projections", "tools")


def ship_sources(spark: SparkSession) -> str:
    """Make icelog importable by the Python workers of any session (``SparkContext.addPyFile`` of a zip of its
    packages, once per context), for sessions not started here, whose workers lack icelog's PYTHONPATH.
    Returns the zip's path."""
    context = spark.sparkContext
    key = id(context._jsc) if context._jsc is not None else id(context)
    with _SHIPPING:
        shipped = _SHIPPED.get(key)
        if shipped is not None:
            return shipped
        return _ship(spark, key)


def _ship(spark: SparkSession, key: int) -> str:
    """Zip icelog's packages into a new temporary folder and add the zip to the session's context (the caller
    holds :data:`_SHIPPING`); the folder goes when the session stops."""
    import zipfile

    context = spark.sparkContext
    folder = temp_folder("icelog-pyfiles-")
    archive = os.path.join(folder, "icelog_sources.zip")
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as out:
        for package in SOURCE_PACKAGES:
            for path in sorted(Path(SOURCE_ROOT, package).rglob("*.py")):
                out.write(path, path.relative_to(SOURCE_ROOT).as_posix())
    context.addPyFile(archive)
    _SHIPPED[key] = archive

    def forget() -> None:
        _SHIPPED.pop(key, None)
        shutil.rmtree(folder, ignore_errors=True)

    after_stop(spark, forget)
    return archive


_TASK_ERROR = re.compile(r"engine\.errors\.(\w+): (.+)")


def _collect(files: DataFrame, job_folder: str) -> list[Any]:
    """Run the write job; a task that failed with an icelog error in a worker (rows that do not fit, a store that
    refused a file) fails it with the same error class here, naming what the task said (errors that carry a path
    name the job's folder)."""
    from pyspark.errors import PythonException

    from engine import errors

    try:
        return files.collect()
    except PythonException as e:
        found = _TASK_ERROR.findall(str(e))
        if not found:
            raise
        name, said = found[-1]
        cls = getattr(errors, name, None)
        if not (isinstance(cls, type) and issubclass(cls, errors.IcelogError)):
            raise
        message = (f"Cannot write with Spark: a task failed: {said.strip()} (nothing was committed; "
                   f"remove_orphan_files deletes the files the job wrote)")
        try:
            error = cls(message)
        except TypeError:  # an error that names its file: the job's folder holds it
            try:
                error = cls(message, path=job_folder)
            except TypeError:  # one that needs more than a message to be made
                error = errors.IcelogError(message)
        raise error from e


def _writer_state(state: Any) -> Any:
    """The table state without its history: what a task needs to write files (schema, spec, properties, sort
    order, location), small enough to ship to every task."""
    import attrs

    return attrs.evolve(state, snapshots=(), expired_snapshots=(), refs=(), snapshot_log=(), metadata_log=())


def write_task(batches: Iterator[pa.RecordBatch], *, state_blob: bytes, job_folder: str,
               keys: int, s3_blob: bytes | None = None) -> Iterator[pa.RecordBatch]:
    """One Spark task of :func:`write` (runs in a Python worker): the rows of this task arrive sorted by their
    partition key columns (the last ``keys`` columns); each run of one key is written as one or more Parquet files
    of that partition; yields one row per file, its DataFile as icelog's file-change JSON."""
    import pyarrow as pa

    from engine.write.data_writer import conform, write_partition_files
    from engine.state.events import FileChange
    from engine.write.sort_rows import sort_table
    from storage.files import FileIO

    state = pickle.loads(state_blob)
    io = FileIO(pickle.loads(s3_blob)) if s3_blob is not None else FileIO()  # the table's S3 settings
    schema, spec = state.schema, state.spec
    ptype = spec.partition_type(schema)
    target = state.int_property("write.target-file-size-bytes", 512 * 1024 * 1024)
    pending: list[pa.RecordBatch] = []
    pending_bytes = 0
    current: tuple[Any, ...] | None = None

    def flush() -> Iterator[pa.RecordBatch]:
        nonlocal pending, pending_bytes
        if not pending:
            return
        rows = pa.Table.from_batches(pending)
        pending, pending_bytes = [], 0
        if keys:
            rows = rows.drop_columns(rows.column_names[-keys:])
        rows = conform(rows, schema)
        if not state.sort_order.is_unsorted:
            rows = sort_table(rows, state.sort_order, schema)
        written = write_partition_files(state, rows, spec=spec, partition=current or (), data_folder=job_folder,
                                        io=io)
        yield pa.record_batch([pa.array([FileChange(added=True, file=f).encode(ptype) for f in written],
                                        pa.string())], names=[_FILE_COLUMN])

    for batch in batches:
        if batch.num_rows == 0:
            continue
        if not keys:
            pending.append(batch)
            pending_bytes += batch.nbytes
            if pending_bytes >= target:
                yield from flush()
            continue
        for start, stop, values in _key_runs(batch, keys, ptype):
            if values != current:
                yield from flush()
                current = values
            piece = batch.slice(start, stop - start)
            pending.append(piece)
            pending_bytes += piece.nbytes
            if pending_bytes >= target:
                yield from flush()
    yield from flush()


def _key_runs(batch: pa.RecordBatch, keys: int, ptype: Any) -> Iterator[tuple[int, int, tuple[Any, ...]]]:
    """(start, stop, partition values) of each run of equal partition keys in a batch sorted by them."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from engine.model.values import value_from_python

    columns = []
    for i in range(batch.num_columns - keys, batch.num_columns):
        column = batch.column(i)
        if pa.types.is_date32(column.type):
            column = column.cast(pa.int32())  # Iceberg's day number, also past Python's year 9999
        elif pa.types.is_timestamp(column.type):
            column = column.cast(pa.timestamp("us", tz=column.type.tz)).cast(pa.int64())
        columns.append(column)
    n = batch.num_rows
    changed = pa.array([False] * (n - 1)) if n > 1 else pa.array([], pa.bool_())
    for column in columns:
        if n <= 1:
            break
        a, b = column.slice(1), column.slice(0, n - 1)
        differs = pc.fill_null(pc.not_equal(a, b), False)
        differs = pc.or_(differs, pc.xor(pc.is_null(a), pc.is_null(b)))
        changed = pc.or_(changed, differs)
    starts = [0] + [i + 1 for i in pc.indices_nonzero(changed).to_pylist()] if n > 1 else [0]
    for j, start in enumerate(starts):
        stop = starts[j + 1] if j + 1 < len(starts) else n
        values = tuple(value_from_python(f.field_type, column[start].as_py())
                       for f, column in zip(ptype.fields, columns))
        yield start, stop, values
