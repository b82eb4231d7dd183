package groupscope;

import java.util.List;

import org.apache.spark.sql.SparkSessionExtensions;
import org.apache.spark.sql.catalyst.FunctionIdentifier;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.ExpressionInfo;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.ScalaUDF;
import org.apache.spark.sql.internal.ToScalaUDF;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

import scala.Function1;
import scala.Option;
import scala.Tuple3;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.BoxedUnit;

/**
 * The decoder's fast path for sessions that Python cannot reach through py4j: a Spark Connect server's.
 * Configured server-side, {@code spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension,groupscope.DecoderExtension},
 * it adds to every session the function CommonOffsetCommits.register adds to one (same name, same class, same
 * columns, nondeterministic), plus FUNCTION_NAME + "_versions", a constant with VERSIONS: the client
 * (jobs/decoder_functions.py) compares the function's result type and that constant with Python's declaration
 * and refuses a mismatch, as register() does.
 */
public final class DecoderExtension implements Function1<SparkSessionExtensions, BoxedUnit> {
    /** transforms.silver.FAST_PATH_FUNCTION: the name silver calls. */
    public static final String FUNCTION_NAME = "groupscope_common_offset_commit";
    /** The types of CommonOffsetCommits.COLUMNS, as transforms.silver.FAST_PATH_TYPE declares them. */
    static final StructType RETURN_TYPE = new StructType(new StructField[] {
        field("is_tombstone", DataTypes.BooleanType), field("group_id", DataTypes.StringType),
        field("topic", DataTypes.StringType), field("partition", DataTypes.IntegerType),
        field("value_version", DataTypes.IntegerType), field("committed_offset", DataTypes.LongType),
        field("leader_epoch", DataTypes.IntegerType), field("metadata", DataTypes.StringType),
        field("committed_at_ms", DataTypes.LongType), field("expires_at_ms", DataTypes.LongType),
        field("topic_id", DataTypes.StringType),
    });
    private static final int ARGUMENTS = 3;  // key, value, read_error

    private static StructField field(String name, DataType type) {
        return DataTypes.createStructField(name, type, true);
    }

    @Override
    public BoxedUnit apply(SparkSessionExtensions extensions) {
        if (!List.of(RETURN_TYPE.fieldNames()).equals(CommonOffsetCommits.COLUMNS)) {
            throw new IllegalStateException("DecoderExtension.RETURN_TYPE does not name CommonOffsetCommits.COLUMNS");
        }
        extensions.injectFunction(new Tuple3<>(
                FunctionIdentifier.apply(FUNCTION_NAME),
                info(FUNCTION_NAME),
                (Function1<Seq<Expression>, Expression>) DecoderExtension::decoder));
        extensions.injectFunction(new Tuple3<>(
                FunctionIdentifier.apply(FUNCTION_NAME + "_versions"),
                info(FUNCTION_NAME + "_versions"),
                (Function1<Seq<Expression>, Expression>) arguments -> Literal.create(
                        CommonOffsetCommits.VERSIONS, DataTypes.StringType)));
        return BoxedUnit.UNIT;
    }

    private static ExpressionInfo info(String name) {
        return new ExpressionInfo(DecoderExtension.class.getName(), null, name);
    }

    /** The same expression functions.udf(new CommonOffsetCommits(), type).asNondeterministic() makes. */
    private static Expression decoder(Seq<Expression> arguments) {
        if (arguments.size() != ARGUMENTS) {
            throw new IllegalArgumentException(FUNCTION_NAME + " takes key, value and read_error, got "
                    + arguments.size() + " arguments");
        }
        Seq<Option<org.apache.spark.sql.catalyst.encoders.ExpressionEncoder<?>>> noEncoders =
                CollectionConverters.asScala(List.<Option<org.apache.spark.sql.catalyst.encoders.ExpressionEncoder<?>>>of())
                        .toSeq();
        return new ScalaUDF(ToScalaUDF.apply(new CommonOffsetCommits()), RETURN_TYPE, arguments, noEncoders,
                Option.empty(), Option.apply(FUNCTION_NAME), true, false);
    }
}
