"""Tests against the real TubeMQ cluster that ``tests/integration/conftest.py`` starts.

``scripts/`` holds the programs these tests start as processes of their own (a consumer-group
member, Spark jobs, a Spark Connect client, a Node.js gateway client). It is deliberately not a
package: the scripts import each other as top-level modules, as they do when run.
"""
