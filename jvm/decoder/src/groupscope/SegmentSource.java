package groupscope;

import java.io.IOException;
import java.io.Serializable;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Ingest's fast path as a Spark source (jobs/segment_reader.py): {@code spark.read.schema(raw_rows_schema)
 * .format("groupscope.SegmentSource")}, one task per partition directory, records streamed out of mapped
 * files without passing through Python. Option {@code reads}: one line per file, tab-separated: task,
 * topic, partition, path, start, known through, pending from (or -), end. With {@code mode=check} it reads
 * nothing out but says, one row per file, where its clean batches end (-1: not clean; the Python reader's).
 *
 * The rows are those transforms.bronze.raw_batch builds from the Python reader's records, in the columns
 * of the schema Python passes (RAW_COLUMNS, refused otherwise); of a file read on from where an earlier run
 * left it, only records raw_records lacks come out, or held pending ones whose transaction has resolved
 * (jobs.steps.ingest._is_news).
 */
public final class SegmentSource implements TableProvider {
    static final List<String> RAW_COLUMNS = List.of("cluster", "record_id", "source_partition", "source_offset",
        "record_at_ms", "timestamp_type", "key", "value", "producer_id", "producer_epoch", "is_transactional",
        "txn_state", "batch_base_offset", "batch_position", "source_kind", "source_file", "read_error",
        "capture_run_id", "source_topic");
    static final String CHECK_SCHEMA = "task INT, path STRING, clean_end BIGINT";
    private static final String CONSUMER_OFFSETS = "__consumer_offsets";

    @Override
    public StructType inferSchema(CaseInsensitiveStringMap options) {
        if (!"check".equals(options.get("mode"))) {
            throw new IllegalArgumentException("groupscope.SegmentSource reads with the schema Python passes");
        }
        return StructType.fromDDL(CHECK_SCHEMA);
    }

    @Override
    public boolean supportsExternalMetadata() {
        return true;
    }

    @Override
    public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
        Options options = new Options(properties);
        if (!options.isCheck && !Arrays.asList(schema.fieldNames()).equals(RAW_COLUMNS)) {
            throw new IllegalArgumentException("groupscope.SegmentSource writes the columns " + RAW_COLUMNS
                + ", not " + Arrays.asList(schema.fieldNames()) + ": this jar is not the checkout's");
        }
        return new SegmentTable(schema, options);
    }

    /** What a read is given: the files of each task, and the constants of every row. */
    static final class Options implements Serializable {
        final boolean isCheck;
        final String cluster, captureRunId;
        final Map<Integer, List<FileRead>> tasks = new LinkedHashMap<>();

        Options(Map<String, String> properties) {
            isCheck = "check".equals(properties.get("mode"));
            cluster = properties.getOrDefault("cluster", "");
            captureRunId = properties.getOrDefault("capture_run_id", "");
            for (String line : properties.getOrDefault("reads", "").split("\n")) {
                if (line.isEmpty()) continue;
                String[] field = line.split("\t", -1);
                FileRead read = new FileRead(field[1], Integer.parseInt(field[2]), field[3], Long.parseLong(field[4]),
                    Long.parseLong(field[5]), field[6].equals("-") ? -1 : Long.parseLong(field[6]),
                    field[7].equals("-") ? -1 : Long.parseLong(field[7]));
                tasks.computeIfAbsent(Integer.parseInt(field[0]), task -> new ArrayList<>()).add(read);
            }
        }
    }

    /** One file of a task; positions as jobs.ingest_plan.FileRead has them (pendingFrom -1: none). */
    record FileRead(String topic, int partition, String path, long start, long knownThrough, long pendingFrom,
            long end) implements Serializable {
        String localPath() {
            return path.startsWith("file:") ? path.substring("file:".length()) : path;
        }

        /** jobs.steps.ingest._is_news: a record raw_records lacks, or holds pending and now resolved. */
        boolean isNews(SegmentLog.Record record) {
            if (record.batchPosition > knownThrough) return true;
            boolean mayBePending = pendingFrom >= 0 && record.batchPosition >= pendingFrom;
            return mayBePending && record.txnState != null && !record.txnState.equals(SegmentLog.PENDING);
        }
    }

    record Task(int index, List<FileRead> reads) implements InputPartition {}

    private record SegmentTable(StructType schema, Options options) implements SupportsRead {
        @Override
        public String name() {
            return "groupscope segment files";
        }

        @Override
        public Set<TableCapability> capabilities() {
            return Set.of(TableCapability.BATCH_READ);
        }

        @Override
        public ScanBuilder newScanBuilder(CaseInsensitiveStringMap ignored) {
            return () -> new SegmentScan(schema, options);
        }
    }

    private record SegmentScan(StructType readSchema, Options options) implements Scan, Batch {
        @Override
        public Batch toBatch() {
            return this;
        }

        @Override
        public InputPartition[] planInputPartitions() {
            return options.tasks.entrySet().stream().map(task -> new Task(task.getKey(), task.getValue()))
                .toArray(InputPartition[]::new);
        }

        @Override
        public PartitionReaderFactory createReaderFactory() {
            Options given = options;
            return (PartitionReaderFactory) partition -> given.isCheck
                ? new QueueReader(checkRows((Task) partition))
                : new RecordReader((Task) partition, given);
        }
    }

    private static ArrayDeque<InternalRow> checkRows(Task task) {
        ArrayDeque<InternalRow> rows = new ArrayDeque<>();
        for (FileRead read : task.reads()) {
            long end = SegmentLog.cleanEnd(read.localPath(), read.start());
            rows.add(new GenericInternalRow(new Object[] {task.index(), UTF8String.fromString(read.path()), end}));
        }
        return rows;
    }

    private static class QueueReader implements PartitionReader<InternalRow> {
        final ArrayDeque<InternalRow> rows;
        private InternalRow current;

        QueueReader(ArrayDeque<InternalRow> rows) {
            this.rows = rows;
        }

        @Override
        public boolean next() throws IOException {
            current = rows.pollFirst();
            return current != null;
        }

        @Override
        public InternalRow get() {
            return current;
        }

        @Override
        public void close() {}
    }

    /** A task's rows: its files read on a thread of its own, handed over in chunks. */
    private static final class RecordReader extends QueueReader {
        private final UTF8String cluster, kind, runId, idPrefix, topic;
        private final UTF8String[] paths;
        private final SegmentLog.PartitionRecords records;

        RecordReader(Task task, Options options) {
            super(new ArrayDeque<>());
            FileRead first = task.reads().get(0);
            cluster = UTF8String.fromString(options.cluster);
            kind = UTF8String.fromString("segment");
            runId = UTF8String.fromString(options.captureRunId);
            topic = UTF8String.fromString(first.topic());
            idPrefix = UTF8String.fromString(
                first.topic().equals(CONSUMER_OFFSETS) ? options.cluster : options.cluster + "/" + first.topic());
            paths = task.reads().stream().map(read -> UTF8String.fromString(read.path())).toArray(UTF8String[]::new);
            List<FileRead> reads = task.reads();
            String[] files = reads.stream().map(FileRead::localPath).toArray(String[]::new);
            long[] starts = reads.stream().mapToLong(FileRead::start).toArray();
            long[] ends = reads.stream().mapToLong(FileRead::end).toArray();
            int partition = first.partition();
            records = new SegmentLog.PartitionRecords(files, starts, ends, record -> {
                if (reads.get(record.fileIndex).isNews(record)) rows.add(row(partition, record));
            });
        }

        @Override
        public boolean next() throws IOException {
            while (rows.isEmpty() && records.advance()) {
                // a batch at a time: rows holds one batch's records, or those a transaction holds back
            }
            return super.next();
        }

        private InternalRow row(int partition, SegmentLog.Record record) {
            UTF8String id = UTF8String.concat(idPrefix, SLASH, UTF8String.fromString(Integer.toString(partition)), SLASH,
                UTF8String.fromString(Long.toString(record.offset)));
            return new GenericInternalRow(new Object[] {
                cluster, id, partition, record.offset, record.timestamp,
                record.isLogAppendTime ? LOG_APPEND_TIME : CREATE_TIME, record.key, record.value, record.producerId,
                record.producerEpoch, record.isTransactional,
                record.txnState == null ? null : UTF8String.fromString(record.txnState), record.batchBaseOffset,
                record.batchPosition, kind, paths[record.fileIndex], null, runId, topic,
            });
        }

        private static final UTF8String SLASH = UTF8String.fromString("/");
        private static final UTF8String CREATE_TIME = UTF8String.fromString(SegmentLog.CREATE_TIME);
        private static final UTF8String LOG_APPEND_TIME = UTF8String.fromString(SegmentLog.LOG_APPEND_TIME);
    }
}
