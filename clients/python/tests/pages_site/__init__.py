"""A small Django site for tests/test_pages_e2e.py, run under gunicorn behind `larder serve`: it counts the requests
each view renders, so a test can tell a page served by larder from one rendered by Django."""
