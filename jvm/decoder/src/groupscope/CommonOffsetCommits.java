package groupscope;

import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Base64;
import java.util.List;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.api.java.UDF3;
import org.apache.spark.sql.expressions.UserDefinedFunction;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;

/**
 * The fast path of the silver decoder, inside the JVM: one common offset commit (key, value, read
 * error of a raw record) -> its decoded fields, or null when the record is not common and the
 * reference decoder (Python, transforms.decoder.decode_rows) must decode it. The fields are COLUMNS,
 * in that order; Python passes their types, and registration fails unless Python names the same
 * columns (transforms.silver.COMMON_OFFSET_COMMIT_COLUMNS) and declares the same value versions for
 * this class (the fast path of OffsetCommitValue in schemas/coordinator_records.py) as VERSIONS.
 *
 * A record is common when every check of the reference decoder would pass trivially (the rules are
 * below, and in transforms/silver.py); tests/test_fast_path.py requires this class and the reference
 * decoder to give the same rows on every real record the project holds and on damaged ones.
 */
public final class CommonOffsetCommits implements UDF3<byte[], byte[], String, Row> {
    /** The fields of the returned row, in order: what `RowFactory.create` below fills. */
    static final List<String> COLUMNS = List.of(
            "is_tombstone", "group_id", "topic", "partition", "value_version", "committed_offset", "leader_epoch",
            "metadata", "committed_at_ms", "expires_at_ms", "topic_id");
    /** The highest OffsetCommitValue version decoded here; each version up to it has a branch in decode(). */
    private static final int MAX_VERSION = 4;
    /** The value versions decoded here, written as the declaration writes them. */
    public static final String VERSIONS = "0-" + MAX_VERSION;
    private static final int RECORD_TYPE_OFFSET_COMMIT = 1;
    private static final int KEY_FIXED_BYTES = 10;
    private static final int MAX_INT16_LENGTH = 0x7FFF;
    private static final int ONE_BYTE_VARINT_LIMIT = 0x80;
    private static final long UNSET_TIMESTAMP = -1L;
    /** OffsetCommitValue v4's one tagged field (tag 0): the topic id clients that commit by id send. */
    private static final int TOPIC_ID_TAG = 0;
    private static final int UUID_BYTES = 16;
    /** Kafka's Uuid.toString(): base64url without padding, as the reference decoder renders it. */
    private static final Base64.Encoder UUID_TEXT = Base64.getUrlEncoder().withoutPadding();

    @Override
    public Row call(byte[] key, byte[] value, String readError) {
        try {
            return decode(key, value, readError);
        } catch (RuntimeException unexpected) {
            return null;  // bytes no rule below foresaw: the reference decoder decides, and quarantines them with a reason
        }
    }

    private static Row decode(byte[] key, byte[] value, String readError) {
        if (key == null || readError != null || key.length < KEY_FIXED_BYTES) return null;
        if (u16(key, 0) != RECORD_TYPE_OFFSET_COMMIT) return null;
        int groupLength = u16(key, 2);
        if (groupLength > MAX_INT16_LENGTH || 6 + groupLength > key.length) return null;
        int topicLength = u16(key, 4 + groupLength);
        if (topicLength > MAX_INT16_LENGTH || key.length != groupLength + topicLength + KEY_FIXED_BYTES) return null;
        String group = utf8(key, 4, groupLength);
        String topic = utf8(key, 6 + groupLength, topicLength);
        if (group == null || topic == null) return null;
        int partition = i32(key, key.length - 4);
        if (value == null) {
            return RowFactory.create(true, group, topic, partition, null, null, null, null, null, null, null);
        }
        if (value.length < 2) return null;
        int version = u16(value, 0);
        if (version > MAX_VERSION) return null;
        int metadataAt, metadataLength, trailer;
        if (version <= 2) {
            if (value.length < 12) return null;
            metadataAt = 12;
            metadataLength = u16(value, 10);
            trailer = version == 1 ? 16 : 8;
        } else if (version == 3) {
            if (value.length < 16) return null;
            metadataAt = 16;
            metadataLength = u16(value, 14);
            trailer = 8;
        } else {
            if (value.length < 15) return null;
            int lengthByte = value[14] & 0xFF;
            if (lengthByte >= ONE_BYTE_VARINT_LIMIT) return null;
            metadataAt = 15;
            metadataLength = lengthByte - 1;
            trailer = 9;
        }
        if (metadataLength < 0 || metadataLength > MAX_INT16_LENGTH) return null;
        int commitAt = metadataAt + metadataLength;
        String topicId = null;
        if (version == 4 && value.length > commitAt + trailer) {
            // One tagged field, the topic id (Java clients committing by topic id write it); any other tag
            // section is the reference decoder's to read.
            int tagAt = commitAt + trailer;
            boolean isTopicIdOnly = value.length == tagAt + 2 + UUID_BYTES && value[tagAt - 1] == 1
                    && value[tagAt] == TOPIC_ID_TAG && value[tagAt + 1] == UUID_BYTES;
            if (!isTopicIdOnly) return null;
            topicId = uuidText(value, tagAt + 2);
        } else if (value.length != commitAt + trailer || (version == 4 && value[commitAt + 8] != 0)) {
            return null;
        }
        String metadata = utf8(value, metadataAt, metadataLength);
        if (metadata == null) return null;
        Integer leaderEpoch = version >= 3 ? i32(value, 10) : null;
        Long expiresAt = null;
        if (version == 1) {
            long expire = i64(value, commitAt + 8);
            if (expire != UNSET_TIMESTAMP) expiresAt = expire;
        }
        return RowFactory.create(false, group, topic, partition, version, i64(value, 2), leaderEpoch, metadata,
                i64(value, commitAt), expiresAt, topicId);
    }

    /** A topic id as text; the all-zero id is the field's default, which a decoded record leaves out (null). */
    private static String uuidText(byte[] bytes, int at) {
        for (int index = at; index < at + UUID_BYTES; index++) {
            if (bytes[index] != 0) return UUID_TEXT.encodeToString(Arrays.copyOfRange(bytes, at, at + UUID_BYTES));
        }
        return null;
    }

    private static int u16(byte[] bytes, int at) {
        return ((bytes[at] & 0xFF) << 8) | (bytes[at + 1] & 0xFF);
    }

    private static int i32(byte[] bytes, int at) {
        return ((bytes[at] & 0xFF) << 24) | ((bytes[at + 1] & 0xFF) << 16) | ((bytes[at + 2] & 0xFF) << 8) | (bytes[at + 3] & 0xFF);
    }

    private static long i64(byte[] bytes, int at) {
        return ((long) i32(bytes, at) << 32) | (i32(bytes, at + 4) & 0xFFFFFFFFL);
    }

    /** The bytes as text, or null when they are not valid UTF-8 (Python's strict decoder is the rule). */
    private static String utf8(byte[] bytes, int at, int length) {
        boolean isAscii = true;
        for (int index = at; index < at + length; index++) {
            if (bytes[index] < 0) {
                isAscii = false;
                break;
            }
        }
        if (isAscii) return new String(bytes, at, length, StandardCharsets.ISO_8859_1);
        CharsetDecoder decoder = StandardCharsets.UTF_8.newDecoder()
                .onMalformedInput(CodingErrorAction.REPORT)
                .onUnmappableCharacter(CodingErrorAction.REPORT);
        try {
            CharBuffer text = decoder.decode(ByteBuffer.wrap(bytes, at, length));
            return text.toString();
        } catch (CharacterCodingException notUtf8) {
            return null;
        }
    }

    /**
     * Registers the function as `name`, marked nondeterministic so that Spark evaluates it once per
     * row: a deterministic one would be copied into every filter and field that reads its result.
     * Refuses (IllegalArgumentException) a return type whose column names are not COLUMNS, or declared
     * versions that are not VERSIONS: the Python side and this class were changed apart, and the rows
     * would be decoded into the wrong columns, or a version would go to a decoder that does not know it.
     */
    public static void register(SparkSession spark, String name, String returnTypeJson, String declaredVersions) {
        DataType returnType = DataType.fromJson(returnTypeJson);
        List<String> expected = returnType instanceof StructType struct ? Arrays.asList(struct.fieldNames()) : List.of();
        if (!expected.equals(COLUMNS)) {
            throw new IllegalArgumentException(
                    "groupscope.CommonOffsetCommits returns the columns " + COLUMNS + ", Python expects " + expected);
        }
        if (!VERSIONS.equals(declaredVersions)) {
            throw new IllegalArgumentException("groupscope.CommonOffsetCommits decodes OffsetCommitValue versions "
                    + VERSIONS + ", the declaration's fast path claims " + declaredVersions);
        }
        UserDefinedFunction decoder = functions.udf(new CommonOffsetCommits(), returnType);
        spark.udf().register(name, decoder.asNondeterministic());
    }
}
