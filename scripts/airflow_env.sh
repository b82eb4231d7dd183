#!/usr/bin/env bash
# Installs Apache Airflow into its own venv, .venv-airflow, idempotently: for the DAG tests (tests/integration/test_dags.py)
# and for trying the DAGs locally. Airflow cannot share .venv with the jobs: its Spark provider brings
# `pyspark-client`, which installs the same `pyspark` package as the jobs' pinned pyspark, without the jars.
# The DAGs use BashOperator from the standard provider that Airflow ships, so no Spark provider is needed.
#
# Airflow's own constraints file is not reachable from here, so every package is pinned below: the set
# `pip install apache-airflow==3.3.2` resolved to on Python 3.11, checked with pip check, `airflow db migrate`,
# a DagBag load and `airflow tasks test` of a DAG task. A second run with nothing changed does no network I/O:
# the venv's stamp records the pins it was built from; changed pins rebuild it from scratch.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv-airflow"
python_bin="${GROUPSCOPE_PYTHON:-python3.11}"
command -v "$python_bin" >/dev/null || python_bin=python3

pins=(
  a2wsgi==1.10.10 aiosmtplib==5.1.3 aiosqlite==0.22.1 alembic==1.20.1 annotated-doc==0.0.7 annotated-types==0.8.0
  anyio==4.16.0 apache-airflow==3.3.2 apache-airflow-core==3.3.2 apache-airflow-providers-common-compat==1.23.0
  apache-airflow-providers-common-io==1.11.0 apache-airflow-providers-common-sql==2.4.0
  apache-airflow-providers-smtp==3.2.0 apache-airflow-providers-standard==1.21.0 apache-airflow-task-sdk==1.3.2
  argcomplete==3.7.2 arrow==1.4.0 asgiref==3.13.0 attrs==26.1.0 babel==2.18.0 cachetools==8.0.1 cadwyn==7.0.0
  certifi==2026.10.18 cffi==2.1.1 charset-normalizer==3.5.2 click==8.5.1 colorlog==6.12.0 cron_descriptor==2.2.1
  croniter==7.0.0 cryptography==50.0.2 Deprecated==1.3.1 dill==0.4.1 dnspython==2.9.2 email-validator==2.4.0
  fastapi==0.136.3 fastapi-cli==0.0.34 fsspec==2026.9.0 googleapis-common-protos==1.76.0 greenback==1.3.0
  greenlet==3.5.6 grpcio==1.85.1 h11==0.16.0 httpcore==1.0.9 httptools==0.9.0 httpx==0.28.1 idna==3.20
  importlib_metadata==10.2.0 isoduration==20.11.0 itsdangerous==2.2.0 Jinja2==3.1.6 jsonschema==4.26.0
  jsonschema-specifications==2025.9.1 lazy-importer==0.1.0 lazy-object-proxy==1.13.0 libcst==1.9.0
  linkify-it-py==2.2.0 lockfile==0.12.2 Mako==1.4.3 markdown-it-py==4.3.0 MarkupSafe==3.0.4 mdurl==0.1.2
  methodtools==0.4.7 more-itertools==11.2.1 msgspec==0.22.0 natsort==8.4.0 opentelemetry-api==1.45.2
  opentelemetry-exporter-http-transport==0.66b2 opentelemetry-exporter-otlp==1.45.2
  opentelemetry-exporter-otlp-common==0.66b2 opentelemetry-exporter-otlp-proto-common==1.45.2
  opentelemetry-exporter-otlp-proto-grpc==1.45.2 opentelemetry-exporter-otlp-proto-http==1.45.2
  opentelemetry-proto==1.45.2 opentelemetry-sdk==1.45.2 opentelemetry-semantic-conventions==0.66b2
  outcome==1.3.0.post0 packaging==26.3 pathlib_abc==0.5.2 pathspec==1.1.1 pendulum==3.3.0 pluggy==1.7.0
  protobuf==7.36.2 psutil==7.2.2 pycparser==3.12 pydantic==2.14.3 pydantic-extra-types==2.11.1
  pydantic-settings==2.16.3 pydantic_core==2.50.4 Pygments==2.21.0 pygtrie==2.6.2 PyJWT==2.15.1
  python-daemon==3.1.2 python-dateutil==4.0.0 python-dotenv==1.2.4 python-multipart==0.0.34 python-slugify==9.2.0
  PyYAML==6.0.3 referencing==0.37.0 requests==2.34.2 rich==15.0.0 rich-argparse==1.8.0 rich-toolkit==0.20.6
  rpds-py==2026.9.1 setproctitle==1.3.8 shellingham==1.5.4 six==1.17.0 sniffio==1.3.1 SQLAlchemy==2.1.9
  sqlparse==0.6.1 starlette==1.10.0 structlog==26.1.0 svcs==26.2.0 tabulate==0.10.0 tenacity==9.2.1
  termcolor==3.3.0 text-unidecode==1.3 typer==0.29.2 typing-inspection==0.4.5 typing_extensions==4.16.0
  tzdata==2026.6 universal_pathlib==0.3.10 urllib3==2.8.0 uuid6==2025.0.1 uvicorn==0.54.0 uvloop==0.23.0
  watchfiles==1.3.0 websockets==17.4 wirerope==1.0.0 wrapt==2.5.2 zipp==4.1.2
)

# The venv sees only its own packages: a PYTHONPATH of the checkout (as `PYTHONPATH=. ./test.sh -p
# bench.suite_cpu` sets) showed pip groupscope's egg-info, and `pip check` failed on its pins.
unset PYTHONPATH

# Two callers at once (tests, a person) must not build the same venv over each other.
exec 9<"${BASH_SOURCE[0]}"
flock 9

want="$({ "$python_bin" --version; printf '%s\n' "${pins[@]}"; } | sha256sum | cut -c1-16)"
if [[ -x "$venv/bin/airflow" && "$(cat "$venv/.groupscope-stamp" 2>/dev/null)" == "$want" ]]; then exit 0; fi

echo "airflow_env: installing Apache Airflow into .venv-airflow (${#pins[@]} pinned packages)" >&2
# From scratch: packages left over from other pins would make the venv differ from what the pins say.
rm -rf "$venv"
"$python_bin" -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check "${pins[@]}"
"$venv/bin/pip" check --disable-pip-version-check >/dev/null
echo "$want" > "$venv/.groupscope-stamp"
