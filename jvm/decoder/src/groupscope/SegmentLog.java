package groupscope;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;
import java.util.zip.CRC32C;

/**
 * Ingest's fast path: one partition's segment files -> its records in log order, each transactional one
 * stamped by the marker that ended its transaction, as transforms.decoder.record_batches.read_partition
 * yields them. It reads only clean logs: uncompressed RecordBatch v2 whose framing, CRC-32C and records all
 * hold, up to a zero-filled preallocated tail. Anything else (legacy magic, compression, damage of any kind)
 * is the Python reader's, which keeps it as a quarantine row with its reason; {@link #cleanEnd} says which
 * files those are before any record is read, so this class never has to describe damage.
 */
final class SegmentLog {
    static final String CREATE_TIME = "create_time", LOG_APPEND_TIME = "log_append_time";
    static final String COMMITTED = "committed", ABORTED = "aborted", PENDING = "pending";

    private static final int LOG_OVERHEAD = 12, HEADER_SIZE = 61, MIN_LENGTH = HEADER_SIZE - LOG_OVERHEAD;
    private static final int CRC_AT = 17, CRC_START = 21, CONTROL = 0x20, TRANSACTIONAL = 0x10;
    private static final int LOG_APPEND = 0x08, CODEC_MASK = 0x07;

    private SegmentLog() {}

    /** One data record, its transaction state set when its marker is read. */
    static final class Record {
        final int fileIndex;
        final long offset, timestamp, producerId, batchBaseOffset, batchPosition;
        final int producerEpoch;
        final boolean isTransactional, isLogAppendTime;
        final byte[] key, value;
        String txnState;

        Record(int fileIndex, long offset, long timestamp, boolean isLogAppendTime, byte[] key, byte[] value,
                long producerId, int producerEpoch, boolean isTransactional, long batchBaseOffset, long batchPosition) {
            this.fileIndex = fileIndex;
            this.offset = offset;
            this.timestamp = timestamp;
            this.isLogAppendTime = isLogAppendTime;
            this.key = key;
            this.value = value;
            this.producerId = producerId;
            this.producerEpoch = producerEpoch;
            this.isTransactional = isTransactional;
            this.txnState = isTransactional ? PENDING : null;
            this.batchBaseOffset = batchBaseOffset;
            this.batchPosition = batchPosition;
        }
    }

    /** Thrown for anything the fast path does not read; the caller never lets it escape a clean file. */
    static final class NotClean extends Exception {
        NotClean(String reason) {
            super(reason, null, false, false);
        }
    }

    static MappedByteBuffer map(String path) throws IOException {
        try (FileChannel channel = FileChannel.open(Path.of(path), StandardOpenOption.READ)) {
            return channel.map(FileChannel.MapMode.READ_ONLY, 0, channel.size());
        }
    }

    /**
     * Where the clean batches of a file end, read from {@code start} (a batch boundary): the file's size, or
     * where a zero-filled preallocated tail begins; -1 when anything from start on is not clean.
     */
    static long cleanEnd(String path, long start) {
        try {
            ByteBuffer data = map(path);
            if (data.limit() < start) return -1;
            Batches batches = new Batches(data, (int) start, data.limit(), false);
            while (batches.next() != null) {
                // walking is the check
            }
            return batches.position;
        } catch (NotClean | IOException | RuntimeException notClean) {
            return -1;
        }
    }

    /** One file's batches from start to end, each its records (or, for a control batch, its markers). */
    static final class Batches {
        private final ByteBuffer data;
        private final int end;
        private final boolean keepBytes;
        private final CRC32C crc = new CRC32C();
        int position;
        long producerId;
        boolean isControl, isTransactional;
        final List<long[]> markers = new ArrayList<>();  // [producer id, 1 commit / 0 abort]

        Batches(ByteBuffer data, int start, int end, boolean keepBytes) {
            this.data = data;
            this.position = start;
            this.end = end;
            this.keepBytes = keepBytes;
        }

        /** The next batch's records (empty for a control batch: see markers), null at the end. */
        List<Record> next() throws NotClean {
            return next(-1);
        }

        List<Record> next(int fileIndex) throws NotClean {
            int pos = position;
            if (pos >= end) return null;
            if (end - pos >= LOG_OVERHEAD && data.getInt(pos + 8) == 0 && zeroFrom(pos)) {
                position = end;
                return null;
            }
            if (end - pos < HEADER_SIZE) throw new NotClean("short header");
            long baseOffset = data.getLong(pos);
            int length = data.getInt(pos + 8);
            if (data.get(pos + 16) != 2) throw new NotClean("not magic 2");
            if (length < MIN_LENGTH || length > end - pos - LOG_OVERHEAD) throw new NotClean("length");
            int batchEnd = pos + LOG_OVERHEAD + length;
            crc.reset();
            crc.update(data.slice(pos + CRC_START, batchEnd - pos - CRC_START));
            if (crc.getValue() != Integer.toUnsignedLong(data.getInt(pos + CRC_AT))) throw new NotClean("crc");
            int attributes = data.getShort(pos + 21) & 0xFFFF;
            long baseTimestamp = data.getLong(pos + 27), maxTimestamp = data.getLong(pos + 35);
            producerId = data.getLong(pos + 43);
            int producerEpoch = data.getShort(pos + 51);
            int count = data.getInt(pos + 57);
            if (count < 0 || (attributes & CODEC_MASK) != 0) throw new NotClean("count or codec");
            isControl = (attributes & CONTROL) != 0;
            isTransactional = (attributes & TRANSACTIONAL) != 0;
            boolean isLogAppendTime = (attributes & LOG_APPEND) != 0;
            markers.clear();
            List<Record> records = new ArrayList<>(keepBytes ? count : 0);
            int at = pos + HEADER_SIZE;
            for (int index = 0; index < count; index++) {
                long recordLength = varint(at);
                at = varintEnd;
                long recordEnd = at + recordLength;
                if (recordLength < 0 || recordEnd > batchEnd) throw new NotClean("record length");
                long timestampDelta = varint(at + 1);
                long offsetDelta = varint(varintEnd);
                int keyLength = (int) varint(varintEnd);
                at = varintEnd;
                int keyAt = at;
                if (keyLength >= 0) at += keyLength;
                int valueLength = (int) varint(at);
                at = varintEnd;
                int valueAt = at;
                if (valueLength >= 0) at += valueLength;
                at = skipHeaders(at);
                if (at != recordEnd) throw new NotClean("record fields");
                if (isControl) {
                    if (keyLength < 4) throw new NotClean("control key");
                    int controlType = data.getShort(keyAt + 2);
                    if (controlType == 0 || controlType == 1) markers.add(new long[] {producerId, controlType});
                } else if (keepBytes) {
                    long timestamp = isLogAppendTime ? maxTimestamp : baseTimestamp + timestampDelta;
                    records.add(new Record(fileIndex, baseOffset + offsetDelta, timestamp, isLogAppendTime,
                        bytes(keyAt, keyLength), bytes(valueAt, valueLength), producerId, producerEpoch,
                        isTransactional, baseOffset, pos));
                }
            }
            if (at != batchEnd) throw new NotClean("bytes left over");
            position = batchEnd;
            return records;
        }

        private boolean zeroFrom(int pos) {
            for (int at = pos; at < end; at++) {
                if (data.get(at) != 0) return false;
            }
            return true;
        }

        private byte[] bytes(int at, int length) {
            if (length < 0) return null;
            byte[] copy = new byte[length];
            data.get(at, copy);
            return copy;
        }

        private int varintEnd;

        /** The zig-zag varint at {@code at}; varintEnd is set to the byte after it. */
        private long varint(int at) throws NotClean {
            long result = 0;
            for (int shift = 0; shift <= 63; shift += 7) {
                int b = data.get(at++);
                result |= (long) (b & 0x7F) << shift;
                if ((b & 0x80) == 0) {
                    varintEnd = at;
                    return (result >>> 1) ^ -(result & 1);
                }
            }
            throw new NotClean("varint");
        }

        private int skipHeaders(int at) throws NotClean {
            long count = varint(at);
            at = varintEnd;
            for (long header = 0; header < count; header++) {
                long keyLength = varint(at);
                long valueLength = varint(varintEnd + (int) Math.max(keyLength, 0));
                at = varintEnd + (int) Math.max(valueLength, 0);
            }
            return at;
        }
    }

    /**
     * The records of one partition's files (read from {@code starts} up to {@code ends}) in log order, a batch
     * at a time, each handed to the sink once its transaction state is final: as resolve_transactions, a
     * transactional batch waits, with everything after it, for its producer's COMMIT or ABORT; what is still
     * open at the end comes out pending. Only one file is mapped at a time and only waiting batches are held.
     */
    static final class PartitionRecords {
        private final String[] paths;
        private final long[] starts, ends;
        private final Consumer<Record> sink;
        private final ArrayDeque<Waiting> waiting = new ArrayDeque<>();
        private final Map<Long, List<Waiting>> openByProducer = new HashMap<>();
        private int file = -1;
        private Batches batches;

        PartitionRecords(String[] paths, long[] starts, long[] ends, Consumer<Record> sink) {
            this.paths = paths;
            this.starts = starts;
            this.ends = ends;
            this.sink = sink;
        }

        /** Reads one more batch; false once every file is read and every record handed over. */
        boolean advance() throws IOException {
            List<Record> records;
            try {
                while (batches == null || (records = batches.next(file)) == null) {
                    if (!openNext()) {
                        for (Waiting entry : waiting) entry.emit(sink);
                        waiting.clear();
                        return false;
                    }
                }
            } catch (NotClean | RuntimeException changed) {
                throw new IOException(paths[file] + " changed during the run after it was checked (" + changed
                    + "); run the job again", changed);
            }
            if (batches.isControl) {
                for (long[] marker : batches.markers) {
                    String state = marker[1] == 1 ? COMMITTED : ABORTED;
                    for (Waiting entry : openByProducer.getOrDefault(marker[0], List.of())) entry.state = state;
                    openByProducer.remove(marker[0]);
                }
            } else if (records.isEmpty()) {
                return true;
            } else if (batches.isTransactional) {
                Waiting entry = new Waiting(records, null);
                openByProducer.computeIfAbsent(batches.producerId, id -> new ArrayList<>()).add(entry);
                waiting.add(entry);
                return true;
            } else if (waiting.isEmpty()) {
                records.forEach(sink);
                return true;
            } else {
                waiting.add(new Waiting(records, Waiting.AS_IS));
            }
            while (!waiting.isEmpty() && waiting.peekFirst().state != null) waiting.pollFirst().emit(sink);
            return true;
        }

        private boolean openNext() throws IOException {
            if (++file >= paths.length) return false;
            ByteBuffer data = map(paths[file]);
            if (data.limit() < ends[file]) {
                throw new IOException(paths[file] + " is shorter than when it was checked: it changed during"
                    + " the run (rewritten by the log cleaner?); run the job again");
            }
            batches = new Batches(data, (int) starts[file], (int) ends[file], true);
            return true;
        }
    }

    private static final class Waiting {
        static final String AS_IS = "as is";
        final List<Record> records;
        String state;

        Waiting(List<Record> records, String state) {
            this.records = records;
            this.state = state;
        }

        void emit(Consumer<Record> sink) {
            for (Record record : records) {
                if (state != null && state != AS_IS) record.txnState = state;
                sink.accept(record);
            }
        }
    }
}
