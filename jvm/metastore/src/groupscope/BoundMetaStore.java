package groupscope;

import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.net.InetSocketAddress;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hive.metastore.HiveMetaStore;
import org.apache.hadoop.hive.metastore.IHMSHandler;
import org.apache.hadoop.hive.metastore.RetryingHMSHandler;
import org.apache.hadoop.hive.metastore.TServerSocketKeepAlive;
import org.apache.hadoop.hive.metastore.TSetIpAddressProcessor;
import org.apache.hadoop.hive.metastore.TUGIBasedProcessor;
import org.apache.hadoop.hive.metastore.conf.MetastoreConf;
import org.apache.hadoop.hive.metastore.conf.MetastoreConf.ConfVars;
import org.apache.hadoop.hive.metastore.security.TUGIContainingTransport;
import org.apache.thrift.TProcessor;
import org.apache.thrift.protocol.TBinaryProtocol;
import org.apache.thrift.protocol.TProtocol;
import org.apache.thrift.server.ServerContext;
import org.apache.thrift.server.TServer;
import org.apache.thrift.server.TServerEventHandler;
import org.apache.thrift.server.TThreadPoolServer;
import org.apache.thrift.transport.TServerSocket;
import org.apache.thrift.transport.TTransport;
import org.apache.thrift.transport.TTransportFactory;

/**
 * Hive 3.1.3's metastore service on one address: {@code BoundMetaStore HOST PORT}, run by
 * scripts/metastore.sh in place of {@code HiveMetaStore -p PORT}.
 *
 * <p>Hive 3.1's HiveMetaStore.startMetaStore binds its Thrift port on every interface (it passes no host
 * to SecurityUtils.getServerSocket; metastore.thrift.bind.host came with Hive 4, whose service no longer
 * answers the get_table call of Spark's built-in Hive 2.3 client). This builds the server startMetaStore
 * builds for the settings scripts/metastore.sh writes (plain Thrift over TCP: no SASL, SSL, framed
 * transport or compact protocol, which it refuses), from the same public parts, on a socket bound to HOST.
 * The handler's own start (its database, the metastore.task.threads.always tasks) is Hive's, unchanged.
 * Not started, as groupscope's tables need none of them: HiveMetaStore.main's threads for transactional
 * (ACID) tables (the compactor, metastore.task.threads.remote) and its metrics.
 */
public final class BoundMetaStore {
  private BoundMetaStore() {}

  public static void main(String[] args) throws Exception {
    if (args.length != 2) {
      System.err.println("usage: BoundMetaStore HOST PORT");
      System.exit(2);
    }
    InetSocketAddress address = new InetSocketAddress(args[0], Integer.parseInt(args[1]));
    Configuration conf = MetastoreConf.newMetastoreConf();
    for (ConfVars unsupported : new ConfVars[] {ConfVars.USE_THRIFT_SASL, ConfVars.USE_SSL,
        ConfVars.USE_THRIFT_FRAMED_TRANSPORT, ConfVars.USE_THRIFT_COMPACT_PROTOCOL}) {
      if (MetastoreConf.getBoolVar(conf, unsupported)) {
        throw new IllegalArgumentException(
            unsupported.getVarname() + " is not supported by " + BoundMetaStore.class.getName());
      }
    }
    // As startMetaStore's first step: the handler then keeps per-connection state (the client's address,
    // a RawStore per thread) as a remote service does, not as a metastore embedded in its client.
    Field remote = HiveMetaStore.class.getDeclaredField("isMetaStoreRemote");
    remote.setAccessible(true);
    remote.setBoolean(null, true);

    IHMSHandler handler = RetryingHMSHandler.getProxy(
        conf, new HiveMetaStore.HMSHandler("new db based metaserver", conf, false), false);
    boolean setUgi = MetastoreConf.getBoolVar(conf, ConfVars.EXECUTE_SET_UGI);
    TProcessor processor = setUgi ? new TUGIBasedProcessor<>(handler) : new TSetIpAddressProcessor<>(handler);
    TTransportFactory transports = setUgi ? new TUGIContainingTransport.Factory() : new TTransportFactory();
    long maxMessageSize = MetastoreConf.getLongVar(conf, ConfVars.SERVER_MAX_MESSAGE_SIZE);
    TServerSocket socket = new TServerSocket(address);
    if (MetastoreConf.getBoolVar(conf, ConfVars.TCP_KEEP_ALIVE)) {
      socket = new TServerSocketKeepAlive(socket);
    }
    TThreadPoolServer.Args serverArgs = new TThreadPoolServer.Args(socket);
    serverArgs.processor(processor).transportFactory(transports).protocolFactory(new TBinaryProtocol.Factory())
        .inputProtocolFactory(new TBinaryProtocol.Factory(true, true, maxMessageSize, maxMessageSize));
    serverArgs.minWorkerThreads(MetastoreConf.getIntVar(conf, ConfVars.SERVER_MIN_THREADS))
        .maxWorkerThreads(MetastoreConf.getIntVar(conf, ConfVars.SERVER_MAX_THREADS));
    TServer server = new TThreadPoolServer(serverArgs);
    server.setServerEventHandler(new ConnectionCleanup());
    System.err.println("groupscope: Hive metastore serving thrift://" + args[0] + ":" + args[1]);
    server.serve();
  }

  /** As startMetaStore's event handler: a closed connection's RawStore (its database session) is shut down. */
  private static final class ConnectionCleanup implements TServerEventHandler {
    private final Method cleanupRawStore;

    ConnectionCleanup() throws NoSuchMethodException {
      cleanupRawStore = HiveMetaStore.class.getDeclaredMethod("cleanupRawStore");
      cleanupRawStore.setAccessible(true);
    }

    @Override
    public void preServe() {}

    @Override
    public ServerContext createContext(TProtocol input, TProtocol output) {
      return null;
    }

    @Override
    public void deleteContext(ServerContext context, TProtocol input, TProtocol output) {
      try {
        cleanupRawStore.invoke(null);
      } catch (ReflectiveOperationException e) {
        throw new IllegalStateException("HiveMetaStore.cleanupRawStore failed", e);
      }
    }

    @Override
    public void processContext(ServerContext context, TTransport input, TTransport output) {}
  }
}
