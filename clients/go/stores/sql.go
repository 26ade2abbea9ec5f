// The SQL stores (STORES.md §6), SQLite (modernc.org/sqlite, pure Go) and PostgreSQL (pgx through
// database/sql), on one schema after Rails' Solid Cache: the same statements on both databases, an upsert with
// the entry's tags in one transaction, counters by compare-and-set, a sweep of expired rows every ~100 writes.
package stores

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

const (
	sqlSchemaVersion = 1
	sqlMaxValue      = 512 << 20
	sweepEvery       = 100
	sweepRows        = 1000
)

var tableName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,50}$`)

// SQL is the SQLite or PostgreSQL store.
type SQL struct {
	db       *sql.DB
	dialect  string // "sqlite" or "postgres"
	prefix   string
	entries  string
	tags     string
	schema   string
	server   string
	timeout  time.Duration
	opts     remoteOptions
	health   health
	writes   atomic.Int64
	isRemote bool
}

// keyHash is the first 8 bytes of SHA-256(stored key) as a big-endian signed integer.
func keyHash(key string) int64 {
	s := sha256.Sum256([]byte(key))
	return int64(binary.BigEndian.Uint64(s[:8]))
}

func sqlTable(u *URL) (string, error) {
	table, ok := u.take("table")
	if !ok {
		table = "larder_entries"
	}
	if !tableName.MatchString(table) {
		return "", u.errorf("table=%q: lowercase letters, digits and _ only", table)
	}
	return table, nil
}

func openSQLite(ctx context.Context, u *URL) (Store, error) {
	prefix, _ := u.take("prefix")
	if err := CheckPrefix(prefix); err != nil {
		return nil, u.errorf("option prefix: %v", err)
	}
	table, err := sqlTable(u)
	if err != nil {
		return nil, err
	}
	if err := u.finish(); err != nil {
		return nil, err
	}
	if len(u.Hosts) > 0 || u.Username != nil {
		return nil, u.errorf("sqlite:// takes a path, not a host (write sqlite:///path)")
	}
	if len(u.Path) < 2 {
		return nil, u.errorf("sqlite:// needs a file: sqlite:///var/lib/larder/cache.db")
	}
	db, err := sql.Open("sqlite", "file:"+u.Path+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)")
	if err != nil {
		return nil, u.errorf("cannot open %s: %v", u.Path, err)
	}
	s := &SQL{db: db, dialect: "sqlite", prefix: prefix, server: u.Path, timeout: 30 * time.Second}
	s.names(table)
	return s, s.ensureSchema(ctx)
}

func openPostgres(ctx context.Context, u *URL) (Store, error) {
	o, err := u.remote(8, time.Second)
	if err != nil {
		return nil, err
	}
	table, err := sqlTable(u)
	if err != nil {
		return nil, err
	}
	if err := u.finish(); err != nil {
		return nil, err
	}
	if len(u.Hosts) != 1 {
		return nil, u.errorf("postgres:// takes one host")
	}
	h := u.Hosts[0]
	cfg, err := pgconnConfig(h, u)
	if err != nil {
		return nil, u.errorf("%v", err)
	}
	cfg.ConnectTimeout = o.connectTimeout
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(o.pool)
	db.SetMaxIdleConns(o.pool)
	s := &SQL{db: db, dialect: "postgres", prefix: o.prefix, server: h.Address(5432), timeout: o.timeout, opts: o, isRemote: true}
	s.names(table)
	return s, s.ensureSchema(ctx)
}

func pgconnConfig(h HostPort, u *URL) (*pgxConnConfig, error) {
	port := h.Port
	if port == 0 {
		port = 5432
	}
	var dsn strings.Builder
	fmt.Fprintf(&dsn, "host=%s port=%d", quoteDSN(h.Host), port)
	if u.Username != nil {
		fmt.Fprintf(&dsn, " user=%s", quoteDSN(*u.Username))
	}
	if u.Password != nil {
		fmt.Fprintf(&dsn, " password=%s", quoteDSN(*u.Password))
	}
	if db := strings.TrimPrefix(u.Path, "/"); db != "" {
		fmt.Fprintf(&dsn, " dbname=%s", quoteDSN(db))
	}
	dsn.WriteString(" sslmode=disable")
	return parsePgxConfig(dsn.String())
}

func quoteDSN(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

func (s *SQL) names(table string) {
	s.entries, s.tags, s.schema = table, table+"_tags", table+"_schema"
}

// q rewrites ? placeholders as $1, $2… for PostgreSQL.
func (s *SQL) q(query string) string {
	if s.dialect != "postgres" {
		return query
	}
	var b strings.Builder
	n := 0
	for _, c := range query {
		if c == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

// run bounds one unit of work by the store's timeout and records the server's health (PostgreSQL).
func (s *SQL) run(ctx context.Context, fn func(ctx context.Context) error) error {
	if s.isRemote && !s.health.admits() {
		s.health.countError()
		return &Error{Kind: Unavailable, Backend: s.dialect, Server: s.server, Msg: "ejected after failures; retrying later"}
	}
	ctx, cancel := context.WithDeadline(ctx, deadline(ctx, s.timeout))
	defer cancel()
	err := fn(ctx)
	if err == nil {
		if s.isRemote {
			s.health.record(true, s.opts.failures, s.opts.retryAfter)
		}
		return nil
	}
	var se *Error
	if errors.As(err, &se) {
		if s.isRemote {
			s.health.abandon()
		}
		return err
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		if s.isRemote {
			s.health.record(true, s.opts.failures, s.opts.retryAfter) // an answer, not a failure (§1)
		}
		return &Error{Kind: Other, Backend: s.dialect, Server: s.server, Err: err}
	}
	kind := Unavailable
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		kind = Timeout
	}
	if s.isRemote {
		s.health.record(false, s.opts.failures, s.opts.retryAfter)
	} else {
		kind = Other
	}
	return &Error{Kind: kind, Backend: s.dialect, Server: s.server, Err: err}
}

func (s *SQL) tx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

func (s *SQL) ensureSchema(ctx context.Context) error {
	blob, text := "BLOB", "TEXT"
	if s.dialect == "postgres" {
		blob, text = "BYTEA", `TEXT COLLATE "C"`
	}
	e, t, sc := s.entries, s.tags, s.schema
	stmts := []string{
		fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (key_hash BIGINT PRIMARY KEY, key %s NOT NULL, value %s NOT NULL, byte_size INTEGER NOT NULL, created_at BIGINT NOT NULL, expires_at BIGINT)", e, text, blob),
		fmt.Sprintf("CREATE INDEX IF NOT EXISTS %s_key ON %s (key)", e, e),
		fmt.Sprintf("CREATE INDEX IF NOT EXISTS %s_expires_at ON %s (expires_at)", e, e),
		fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (tag %s NOT NULL, key_hash BIGINT NOT NULL, PRIMARY KEY (tag, key_hash))", t, text),
		fmt.Sprintf("CREATE INDEX IF NOT EXISTS %s_key_hash ON %s (key_hash)", t, t),
		fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (version INTEGER NOT NULL)", sc),
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := s.tx(ctx, func(tx *sql.Tx) error {
		if s.dialect == "postgres" {
			if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock(4242424242)"); err != nil {
				return err
			}
		}
		for _, st := range stmts {
			if _, err := tx.ExecContext(ctx, st); err != nil {
				return err
			}
		}
		var version sql.NullInt64
		if err := tx.QueryRowContext(ctx, "SELECT CAST(MAX(version) AS BIGINT) FROM "+sc).Scan(&version); err != nil {
			return err
		}
		if !version.Valid {
			_, err := tx.ExecContext(ctx, s.q("INSERT INTO "+sc+" (version) VALUES (?)"), sqlSchemaVersion)
			return err
		}
		if version.Int64 > sqlSchemaVersion {
			return &Error{Kind: Other, Backend: s.dialect, Server: s.server,
				Msg: fmt.Sprintf("the database's larder schema is version %d, newer than this larder's %d", version.Int64, sqlSchemaVersion)}
		}
		return nil
	})
	if err != nil {
		s.db.Close()
		var se *Error
		if errors.As(err, &se) {
			return se
		}
		return &Error{Kind: Unavailable, Backend: s.dialect, Server: s.server, Msg: "creating the schema", Err: err}
	}
	return nil
}

func (s *SQL) Backend() string { return s.dialect }
func (s *SQL) MaxValue() int   { return sqlMaxValue }
func (s *SQL) Close() error    { return s.db.Close() }

func (s *SQL) stored(key string) (string, error) {
	if err := CheckKey(key); err != nil {
		return "", keyError(s.dialect, err)
	}
	return StoredKey(s.prefix, key), nil
}

func (s *SQL) Get(ctx context.Context, key string) ([]byte, error) {
	vs, err := s.GetMulti(ctx, []string{key})
	if err != nil {
		return nil, err
	}
	return vs[0], nil
}

func placeholders(n int) string { return strings.TrimSuffix(strings.Repeat("?,", n), ",") }

func (s *SQL) getStored(ctx context.Context, stored []string) ([][]byte, error) {
	out := make([][]byte, len(stored))
	now := nowMs()
	for at := 0; at < len(stored); at += 500 {
		chunk := stored[at:min(len(stored), at+500)]
		args := make([]any, len(chunk))
		for i, k := range chunk {
			args[i] = keyHash(k)
		}
		found := map[string][]byte{}
		err := s.run(ctx, func(ctx context.Context) error {
			rows, err := s.db.QueryContext(ctx, s.q("SELECT key, value, expires_at FROM "+s.entries+" WHERE key_hash IN ("+placeholders(len(chunk))+")"), args...)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var k string
				var v []byte
				var exp sql.NullInt64
				if err := rows.Scan(&k, &v, &exp); err != nil {
					return err
				}
				if !exp.Valid || exp.Int64 > now {
					found[k] = v
				}
			}
			return rows.Err()
		})
		if err != nil {
			return nil, err
		}
		for i, k := range chunk {
			out[at+i] = found[k]
		}
	}
	return out, nil
}

func (s *SQL) GetMulti(ctx context.Context, keys []string) ([][]byte, error) {
	stored := make([]string, len(keys))
	for i, k := range keys {
		st, err := s.stored(k)
		if err != nil {
			return nil, err
		}
		stored[i] = st
	}
	return s.getStored(ctx, stored)
}

func (s *SQL) write(ctx context.Context, items []Item, ttl time.Duration, onlyIfAbsent bool) (bool, error) {
	now := nowMs()
	e := s.entries
	upsert := "INSERT INTO " + e + " (key_hash, key, value, byte_size, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)" +
		" ON CONFLICT (key_hash) DO UPDATE SET key = excluded.key, value = excluded.value, byte_size = excluded.byte_size," +
		" created_at = excluded.created_at, expires_at = excluded.expires_at"
	if onlyIfAbsent {
		upsert += " WHERE " + e + ".expires_at IS NOT NULL AND " + e + ".expires_at <= ?"
	}
	upsert = s.q(upsert)
	storedAll := true
	err := s.run(ctx, func(ctx context.Context) error {
		storedAll = true
		return s.tx(ctx, func(tx *sql.Tx) error {
			for _, it := range items {
				h := keyHash(it.Key)
				exp := expiresAt(it.Value, ttl, now)
				if exp != 0 && exp <= now {
					if onlyIfAbsent {
						storedAll = false
						continue
					}
					if _, err := tx.ExecContext(ctx, s.q("DELETE FROM "+e+" WHERE key_hash = ?"), h); err != nil {
						return err
					}
					if _, err := tx.ExecContext(ctx, s.q("DELETE FROM "+s.tags+" WHERE key_hash = ?"), h); err != nil {
						return err
					}
					continue
				}
				var expArg any
				if exp != 0 {
					expArg = exp
				}
				args := []any{h, it.Key, it.Value, len(it.Key) + len(it.Value), now, expArg}
				if onlyIfAbsent {
					args = append(args, now)
				}
				res, err := tx.ExecContext(ctx, upsert, args...)
				if err != nil {
					return err
				}
				if n, _ := res.RowsAffected(); n != 1 {
					storedAll = false
					continue
				}
				if _, err := tx.ExecContext(ctx, s.q("DELETE FROM "+s.tags+" WHERE key_hash = ?"), h); err != nil {
					return err
				}
				for _, tag := range entryTags(it.Value) {
					if _, err := tx.ExecContext(ctx, s.q("INSERT INTO "+s.tags+" (tag, key_hash) VALUES (?, ?) ON CONFLICT DO NOTHING"), tag, h); err != nil {
						return err
					}
				}
			}
			return nil
		})
	})
	if err != nil {
		return false, err
	}
	if s.writes.Add(1)%sweepEvery == 0 {
		_ = s.run(ctx, func(ctx context.Context) error {
			_, err := s.db.ExecContext(ctx, s.q("DELETE FROM "+e+" WHERE key_hash IN (SELECT key_hash FROM "+e+
				" WHERE expires_at IS NOT NULL AND expires_at <= ? LIMIT ?)"), nowMs(), sweepRows)
			return err
		})
	}
	return storedAll, nil
}

func (s *SQL) checkSize(key string, value []byte) error {
	if len(value) > sqlMaxValue {
		return &Error{Kind: TooLarge, Backend: s.dialect, Msg: fmt.Sprintf("value of %d bytes for key %s exceeds the %d-byte limit", len(value), key, sqlMaxValue)}
	}
	return nil
}

func (s *SQL) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	return s.SetMulti(ctx, []Item{{key, value}}, ttl)
}

func (s *SQL) SetMulti(ctx context.Context, items []Item, ttl time.Duration) error {
	batch := make([]Item, len(items))
	for i, it := range items {
		st, err := s.stored(it.Key)
		if err != nil {
			return err
		}
		if err := s.checkSize(it.Key, it.Value); err != nil {
			return err
		}
		batch[i] = Item{st, it.Value}
	}
	_, err := s.write(ctx, batch, ttl, false)
	return err
}

func (s *SQL) Add(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error) {
	st, err := s.stored(key)
	if err != nil {
		return false, err
	}
	if err := s.checkSize(key, value); err != nil {
		return false, err
	}
	return s.write(ctx, []Item{{st, value}}, ttl, true)
}

func (s *SQL) Incr(ctx context.Context, key string, delta int64, ttl time.Duration, create bool) (int64, bool, error) {
	st, err := s.stored(key)
	if err != nil {
		return 0, false, err
	}
	h := keyHash(st)
	for range 100 {
		var live []byte
		var exp sql.NullInt64
		found := false
		err := s.run(ctx, func(ctx context.Context) error {
			err := s.db.QueryRowContext(ctx, s.q("SELECT value, expires_at FROM "+s.entries+" WHERE key_hash = ? AND key = ?"), h, st).Scan(&live, &exp)
			if errors.Is(err, sql.ErrNoRows) {
				return nil
			}
			found = err == nil
			return err
		})
		if err != nil {
			return 0, false, err
		}
		if !found || (exp.Valid && exp.Int64 <= nowMs()) {
			if !create {
				return 0, false, nil
			}
			ok, err := s.write(ctx, []Item{{st, []byte(itoa64(delta))}}, ttl, true)
			if err != nil {
				return 0, false, err
			}
			if ok {
				return delta, true, nil
			}
			continue
		}
		old, isCounter := parseCounter(live)
		if !isCounter {
			return 0, false, &Error{Kind: NotACounter, Backend: s.dialect, Msg: "key " + key + " holds a value that is not a counter"}
		}
		n := saturatingAdd(old, delta)
		text := []byte(itoa64(n))
		var rows int64
		err = s.run(ctx, func(ctx context.Context) error {
			res, err := s.db.ExecContext(ctx, s.q("UPDATE "+s.entries+" SET value = ?, byte_size = ? WHERE key_hash = ? AND value = ?"),
				text, len(st)+len(text), h, live)
			if err != nil {
				return err
			}
			rows, err = res.RowsAffected()
			return err
		})
		if err != nil {
			return 0, false, err
		}
		if rows == 1 {
			return n, true, nil
		}
	}
	return 0, false, &Error{Kind: Other, Backend: s.dialect, Server: s.server, Msg: "counter " + key + " kept changing under 100 attempts to update it"}
}

func (s *SQL) DeleteIf(ctx context.Context, key string, expected []byte) (bool, error) {
	st, err := s.stored(key)
	if err != nil {
		return false, err
	}
	var n int64
	err = s.run(ctx, func(ctx context.Context) error {
		res, err := s.db.ExecContext(ctx, s.q("DELETE FROM "+s.entries+" WHERE key_hash = ? AND key = ? AND value = ?"), keyHash(st), st, expected)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n == 1, err
}

func (s *SQL) deleteHashes(ctx context.Context, hashes []int64) (int, error) {
	deleted := 0
	for at := 0; at < len(hashes); at += 500 {
		chunk := hashes[at:min(len(hashes), at+500)]
		args := make([]any, len(chunk))
		for i, h := range chunk {
			args[i] = h
		}
		marks := placeholders(len(chunk))
		err := s.run(ctx, func(ctx context.Context) error {
			return s.tx(ctx, func(tx *sql.Tx) error {
				res, err := tx.ExecContext(ctx, s.q("DELETE FROM "+s.entries+" WHERE key_hash IN ("+marks+")"), args...)
				if err != nil {
					return err
				}
				n, _ := res.RowsAffected()
				deleted += int(n)
				_, err = tx.ExecContext(ctx, s.q("DELETE FROM "+s.tags+" WHERE key_hash IN ("+marks+")"), args...)
				return err
			})
		})
		if err != nil {
			return deleted, err
		}
	}
	return deleted, nil
}

func (s *SQL) Delete(ctx context.Context, key string) (bool, error) {
	n, err := s.DeleteMulti(ctx, []string{key})
	return n == 1, err
}

func (s *SQL) DeleteMulti(ctx context.Context, keys []string) (int, error) {
	stored := make([]string, len(keys))
	for i, k := range keys {
		st, err := s.stored(k)
		if err != nil {
			return 0, err
		}
		stored[i] = st
	}
	live, err := s.getStored(ctx, stored)
	if err != nil {
		return 0, err
	}
	var hashes []int64
	for i, v := range live {
		if v != nil {
			hashes = append(hashes, keyHash(stored[i]))
		}
	}
	return s.deleteHashes(ctx, hashes)
}

func (s *SQL) Clear(ctx context.Context) error {
	if s.prefix != "" {
		_, err := s.PurgePrefix(ctx, "")
		return err
	}
	return s.run(ctx, func(ctx context.Context) error {
		return s.tx(ctx, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, "DELETE FROM "+s.entries); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, "DELETE FROM "+s.tags)
			return err
		})
	})
}

func (s *SQL) hashes(ctx context.Context, query string, arg any) ([]int64, error) {
	var out []int64
	err := s.run(ctx, func(ctx context.Context) error {
		rows, err := s.db.QueryContext(ctx, s.q(query), arg)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var h int64
			if err := rows.Scan(&h); err != nil {
				return err
			}
			out = append(out, h)
		}
		return rows.Err()
	})
	return out, err
}

func (s *SQL) PurgePrefix(ctx context.Context, prefix string) (Purged, error) {
	if err := CheckPrefix(prefix); err != nil {
		return Purged{}, keyError(s.dialect, err)
	}
	stored := s.prefix + prefix
	hashes, err := s.hashes(ctx, "SELECT key_hash FROM "+s.entries+" WHERE substr(key, 1, "+strconv.Itoa(utf8.RuneCountInString(stored))+") = ?", stored)
	if err != nil {
		return Purged{}, err
	}
	n, err := s.deleteHashes(ctx, hashes)
	return Purged{Count: int64(n)}, err
}

func (s *SQL) PurgeTag(ctx context.Context, tag string) (Purged, error) {
	hashes, err := s.hashes(ctx, "SELECT key_hash FROM "+s.tags+" WHERE tag = ?", tag)
	if err != nil {
		return Purged{}, err
	}
	n, err := s.deleteHashes(ctx, hashes)
	if err != nil {
		return Purged{}, err
	}
	err = s.run(ctx, func(ctx context.Context) error {
		_, err := s.db.ExecContext(ctx, s.q("DELETE FROM "+s.tags+" WHERE tag = ?"), tag)
		return err
	})
	return Purged{Count: int64(n)}, err
}

func (s *SQL) Stats(ctx context.Context) (Stats, error) {
	st := Stats{}
	if s.isRemote {
		st.ServerErrors = map[string]int64{s.server: s.health.errorCount()}
	}
	err := s.run(ctx, func(ctx context.Context) error {
		var bytes sql.NullInt64
		err := s.db.QueryRowContext(ctx, s.q("SELECT COUNT(*), SUM(byte_size) FROM "+s.entries+" WHERE expires_at IS NULL OR expires_at > ?"), nowMs()).Scan(&st.Entries, &bytes)
		st.Bytes = bytes.Int64
		return err
	})
	return st, err
}
