"""A stand-in for the Hugging Face hub in tests (no network): huggingface_hub's download functions, patched."""

from __future__ import annotations

import fnmatch
import shutil


class FakeHubCache:
    """Stands in for hf_hub_download, snapshot_download and try_to_load_from_cache: a repo is a source folder;
    what is fetched is copied into a cache folder, and ``local_files_only`` reads only that cache."""

    def __init__(self, repos: dict, cache):
        self.repos, self.cache, self.calls = repos, cache, []

    def _fetch(self, repo_id, filename, local_files_only):
        cached = self.cache / repo_id / filename
        if not cached.is_file():
            source = self.repos[repo_id] / filename
            if local_files_only or not source.is_file():
                from huggingface_hub.errors import LocalEntryNotFoundError

                raise LocalEntryNotFoundError(f"{filename} of {repo_id} is not in the cache")
            cached.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source, cached)
        return cached

    def hf_hub_download(self, repo_id, filename, *, cache_dir=None, local_files_only=False, tqdm_class=None):
        self.calls.append(("file", repo_id, filename))
        return str(self._fetch(repo_id, filename, local_files_only))

    def snapshot_download(self, repo_id, *, cache_dir=None, local_files_only=False, allow_patterns=None, **kw):
        self.calls.append(("snapshot", repo_id, tuple(allow_patterns or ())))
        if local_files_only and not (self.cache / repo_id).is_dir():
            from huggingface_hub.errors import LocalEntryNotFoundError

            raise LocalEntryNotFoundError(f"{repo_id} is not in the cache")
        names = sorted(p.name for p in self.repos[repo_id].iterdir())
        for name in names:
            if allow_patterns is None or any(fnmatch.fnmatch(name, pat) for pat in allow_patterns):
                self._fetch(repo_id, name, local_files_only)
        return str(self.cache / repo_id)

    def try_to_load_from_cache(self, repo_id, filename, cache_dir=None, **kw):
        path = self.cache / repo_id / filename
        return str(path) if path.is_file() else None

    def patch(self, monkeypatch):
        import huggingface_hub

        for name in ("hf_hub_download", "snapshot_download", "try_to_load_from_cache"):
            monkeypatch.setattr(huggingface_hub, name, getattr(self, name))
        return self
