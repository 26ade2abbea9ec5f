"""Settings of the test site: larder's page middleware first, writing into the store the test's larder serves from
($LARDER_PAGES_STORE, namespace $LARDER_PAGES_NAMESPACE)."""

from __future__ import annotations

import os

SECRET_KEY = "pages-site-test-only"
DEBUG = False
ALLOWED_HOSTS = ["*"]
ROOT_URLCONF = "pages_site.urls"
MIDDLEWARE = ["larder.django.PageCacheMiddleware"]
INSTALLED_APPS: list[str] = []
DATABASES: dict[str, object] = {}
USE_TZ = True
LARDER_PAGES = {"STORE": os.environ["LARDER_PAGES_STORE"], "NAMESPACE": os.environ.get("LARDER_PAGES_NAMESPACE", "")}
