// A sink connector that accepts and drops every record: just enough for a real Kafka Connect worker
// group to assign a connector and tasks, and for its tasks to form a real Java-client consumer group.
// Compiled by lab/scenarios/connect.py against the connect-api jar of the broker's Kafka line.
package groupscope.lab;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.sink.SinkConnector;
import org.apache.kafka.connect.sink.SinkRecord;
import org.apache.kafka.connect.sink.SinkTask;

public class LabSinkConnector extends SinkConnector {
    private Map<String, String> config;

    @Override public String version() { return "1.0"; }
    @Override public void start(Map<String, String> props) { config = props; }
    @Override public Class<? extends Task> taskClass() { return DropTask.class; }
    @Override public void stop() { }
    @Override public ConfigDef config() { return new ConfigDef(); }

    @Override
    public List<Map<String, String>> taskConfigs(int maxTasks) {
        List<Map<String, String>> configs = new ArrayList<>();
        for (int i = 0; i < maxTasks; i++) configs.add(config);
        return configs;
    }

    public static class DropTask extends SinkTask {
        @Override public String version() { return "1.0"; }
        @Override public void start(Map<String, String> props) { }
        @Override public void put(Collection<SinkRecord> records) { }
        @Override public void stop() { }
    }
}
