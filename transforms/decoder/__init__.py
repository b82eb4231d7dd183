"""The binary decoder: `__consumer_offsets` bytes -> plain Python values. Pure Python, never pyspark.

The log layer reads one partition's segments, given as (path, bytes), into `log_record.LogRecord`s:
`record_batches` (the framing of a segment), `v2_batches` (RecordBatch magic 2), `legacy_messages`
(magic 0 and 1), `compression`, `batch_resync` (where reading resumes after damage) and
`log_transactions` (COMMIT/ABORT markers); finding and reading files is `jobs.segment_files`'.
The record layer reads one record's key and value: `layout_reader` interprets the layouts declared
in `schemas/`, `coordinator_records` dispatches on the record type, and `decode_rows` shapes a
decoded record into a silver row. Bad bytes in either layer are one `errors.CorruptRecordError`
(where, expected, found).

`jobs.dump` uses it with no JVM; `transforms.silver` runs it inside Spark over Arrow batches.
Importing this package never loads pyspark (tests/unit/test_decoder_package.py).
"""
