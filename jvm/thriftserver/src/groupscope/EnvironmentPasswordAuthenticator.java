package groupscope;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import javax.security.sasl.AuthenticationException;
import org.apache.hive.service.auth.PasswdAuthenticationProvider;

/**
 * The Spark Thrift server's password check for {@code [thriftserver] authentication = "password"}
 * (scripts/thriftserver.sh, docs/sql.md): one user name and password, each read from the server's
 * environment, in the variables whose names the launcher passes as the system properties below
 * ({@code --hiveconf}, which sets them: names only, never values, are on the command line).
 *
 * <p>Loaded by Hive's CustomAuthenticationProviderImpl for {@code hive.server2.authentication=CUSTOM}.
 * The variables are read at each login, so a server started without them refuses everyone rather than
 * anyone. Neither value is logged or put in a message: a refusal says only that the pair was wrong.
 */
public final class EnvironmentPasswordAuthenticator implements PasswdAuthenticationProvider {
  static final String USER_ENV_PROPERTY = "groupscope.thriftserver.user_env";
  static final String PASSWORD_ENV_PROPERTY = "groupscope.thriftserver.password_env";

  @Override
  public void Authenticate(String user, String password) throws AuthenticationException {
    byte[] expectedUser = variable(USER_ENV_PROPERTY);
    byte[] expectedPassword = variable(PASSWORD_ENV_PROPERTY);
    // Both compared in full, in time independent of where they differ: a refusal tells nothing of which.
    boolean userMatches = MessageDigest.isEqual(bytes(user), expectedUser);
    boolean passwordMatches = MessageDigest.isEqual(bytes(password), expectedPassword);
    if (!(userMatches & passwordMatches)) {
      throw new AuthenticationException("wrong user name or password");
    }
  }

  private static byte[] variable(String property) throws AuthenticationException {
    String name = System.getProperty(property, "");
    String value = name.isEmpty() ? null : System.getenv(name);
    if (value == null || value.isEmpty()) {
      throw new AuthenticationException(
          "the Thrift server's environment variable " + (name.isEmpty() ? "(" + property + ")" : name)
              + " is not set: every login is refused");
    }
    return value.getBytes(StandardCharsets.UTF_8);
  }

  private static byte[] bytes(String text) {
    return text == null ? new byte[0] : text.getBytes(StandardCharsets.UTF_8);
  }
}
