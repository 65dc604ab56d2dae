package kag.neo4j;

import java.util.concurrent.CountDownLatch;
import org.neo4j.configuration.GraphDatabaseSettings;
import org.neo4j.configuration.connectors.BoltConnector;
import org.neo4j.configuration.helpers.SocketAddress;
import org.neo4j.graphdb.GraphDatabaseService;
import org.neo4j.harness.Neo4j;
import org.neo4j.harness.Neo4jBuilders;

/**
 * A Neo4j for kag's tests: the harness's in-process server with Bolt on 127.0.0.1 (a free port)
 * and authentication on. Prints "bolt://127.0.0.1:PORT USER PASSWORD" as its first line of
 * stdout, then serves until SIGINT or SIGTERM and stops cleanly.
 *
 * Arguments: [USER [PASSWORD]] (default neo4j / kag-test-password).
 */
public final class Launcher {
    private Launcher() {}

    public static void main(String[] args) throws Exception {
        String user = args.length > 0 ? args[0] : "neo4j";
        String password = args.length > 1 ? args[1] : "kag-test-password";
        Neo4j neo4j = Neo4jBuilders.newInProcessBuilder()
                .withDisabledServer()
                .withConfig(GraphDatabaseSettings.auth_enabled, true)
                .withConfig(BoltConnector.enabled, true)
                .withConfig(BoltConnector.listen_address, new SocketAddress("127.0.0.1", 0))
                .build();
        GraphDatabaseService system = neo4j.databaseManagementService().database("system");
        String quoted = "'" + password.replace("\\", "\\\\").replace("'", "\\'") + "'";
        if (user.equals("neo4j")) {
            system.executeTransactionally("ALTER USER neo4j SET PASSWORD " + quoted + " CHANGE NOT REQUIRED");
        } else {
            system.executeTransactionally(
                    "CREATE USER `" + user.replace("`", "``") + "` SET PASSWORD " + quoted + " CHANGE NOT REQUIRED");
        }
        CountDownLatch stopped = new CountDownLatch(1);
        CountDownLatch closed = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            stopped.countDown();
            try {
                closed.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }));
        int port = neo4j.boltURI().getPort();
        System.out.println("bolt://127.0.0.1:" + port + " " + user + " " + password);
        System.out.flush();
        stopped.await();
        neo4j.close();
        closed.countDown();
    }
}
