package store

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"gorm.io/gorm"
)

// The console's text search over a task's code and name (TaskFilter.Text).
// What it matches depends on the backend, as docs/console.md tells users:
//
//   - PostgreSQL and SQLite: the code or the name contains the text, a
//     substring, ignoring case. PostgreSQL serves it from trigram indexes
//     on lower(code), and on lower(name) of the tasks whose name is not
//     their code (Migrate creates them with pg_trgm; without the extension
//     the same search scans the app's tasks).
//   - MySQL and MariaDB, which have no trigram index: the code or the name
//     contains the text at the start of a word, ignoring case: "job-0012"
//     and "0012" find job-0012345, "rep" finds "Nightly report", "port"
//     does not. A word starts at the beginning of the value or after a
//     character other than an ASCII letter, digit or underscore. The code
//     prefix is served by the (app, code) index and the words by a
//     FULLTEXT index on (code, name); each candidate is checked against
//     the exact rule with REGEXP.
//
// MatchesText is that rule in Go.

// ftMinWord is the shortest word InnoDB's FULLTEXT index holds (its
// innodb_ft_min_token_size default); ftMaxWord the longest.
const (
	ftMinWord = 3
	ftMaxWord = 84
)

// denseWindow is how many of the app's tasks, in code order, a search on
// MySQL or PostgreSQL reads first: when the text is common, the page is
// among them, and the FULLTEXT or trigram indexes, which return every
// match unordered, are not asked.
const denseWindow = 5000

// MatchesText reports whether a search for text finds t, by its code and
// name, on s's backend (TaskFilter.Text; its other filters aside).
func (s *Store) MatchesText(t Task, text string) bool {
	if s.db.Dialector.Name() == "mysql" {
		return atWordStart(t.Code, text) || atWordStart(t.Name, text)
	}
	text = strings.ToLower(text)
	return strings.Contains(strings.ToLower(t.Code), text) || strings.Contains(strings.ToLower(t.Name), text)
}

// atWordStart reports whether text occurs in v at the start of a word,
// ignoring case.
func atWordStart(v, text string) bool {
	lv, lt := strings.ToLower(v), strings.ToLower(text)
	for i := 0; i <= len(lv)-len(lt); i++ {
		if strings.HasPrefix(lv[i:], lt) && (i == 0 || !asciiWordByte(lv[i-1])) {
			return true
		}
	}
	return false
}

func asciiWordByte(b byte) bool {
	return b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}

// wordStartRegexp is the REGEXP (PCRE, as MariaDB and MySQL 8 run it) of
// atWordStart: every character of text that is not an ASCII letter or
// digit is escaped with a backslash, which PCRE reads as that character.
func wordStartRegexp(text string) string {
	var b strings.Builder
	b.WriteString("(?i)(^|[^0-9A-Za-z_])")
	for _, r := range text {
		if r < utf8.RuneSelf && (r == '_' || !unicode.IsLetter(r) && !unicode.IsDigit(r)) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// fulltextQuery returns the BOOLEAN MODE query whose matches include every
// task atWordStart finds for text: one word of text long enough for the
// index, as a prefix ("+0012*" for "job-0012"). Each word of text starts a
// word of a value the text occurs in at a word start, so it is a prefix of
// one of the value's indexed words. One word, the longest (the last of
// equals): InnoDB reads the whole list of every word it is given, and for
// "job-0012" that of "job*" holds every task. ok is false when text has no
// word the index holds.
func fulltextQuery(text string) (query string, ok bool) {
	best, bestLen := "", 0
	for _, w := range strings.FieldsFunc(text, func(r rune) bool { return !ftWordRune(r) }) {
		if n := utf8.RuneCountInString(w); n >= ftMinWord && n <= ftMaxWord && n >= bestLen {
			best, bestLen = w, n
		}
	}
	return "+" + best + "*", best != ""
}

// ftWordRune is a character InnoDB's FULLTEXT parser keeps inside a word.
func ftWordRune(r rune) bool { return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) }

// substringCond is the search on PostgreSQL and SQLite, with
// substringArgs: LOWER on both sides, so that each backend folds pattern
// and column with the same function; on PostgreSQL the trigram indexes
// are on these expressions. A name that is its code matches when the code
// does: the name's index holds only the other names (name <> code, the
// index's predicate, which the condition repeats so that PostgreSQL may
// use it).
const substringCond = "(LOWER(code) LIKE LOWER(?) ESCAPE '" + likeEscape + "' OR (name <> code AND LOWER(name) LIKE LOWER(?) ESCAPE '" + likeEscape + "'))"

func substringArgs(text string) []any {
	pattern := "%" + escapeLike(text) + "%"
	return []any{pattern, pattern}
}

// searchPostgres is ListTasks with a text, on PostgreSQL. Left to itself
// the planner guesses how many tasks a LIKE keeps, and guesses both ways
// wrong: it walked the (app, code) index through a million tasks for a
// rare text, and read a hundred thousand rows from the trigram indexes
// to sort them for a common one. So, as on MySQL, the next denseWindow
// tasks in code order come first; when they do not fill the page the
// matches come from the trigram indexes (a MATERIALIZED CTE, which the
// ordered index cannot serve), sorted.
func searchPostgres(db *gorm.DB, f TaskFilter, afterCode string, limit int) ([]Task, error) {
	conds, args := taskConds("", f, afterCode)
	window, wargs := taskConds("", TaskFilter{App: f.App}, afterCode)
	filters, fargs := taskConds("", TaskFilter{App: f.App, Status: f.Status, Kind: f.Kind}, "")
	var out []Task
	err := db.Raw(fmt.Sprintf(`SELECT * FROM (SELECT * FROM xtimer_tasks WHERE %s ORDER BY code LIMIT %d) AS w
		WHERE %s AND %s ORDER BY code LIMIT %d`, window, denseWindow, filters, substringCond, limit+1),
		append(append(wargs, fargs...), substringArgs(f.Text)...)...).Scan(&out).Error
	if err != nil || len(out) > limit {
		return out, err
	}
	out = nil
	err = db.Raw(fmt.Sprintf(`WITH m AS MATERIALIZED (SELECT * FROM xtimer_tasks WHERE %s AND %s)
		SELECT * FROM m ORDER BY code LIMIT %d`, conds, substringCond, limit+1),
		append(args, substringArgs(f.Text)...)...).Scan(&out).Error
	return out, err
}

// tasksByCode is xtimer_tasks on MySQL and MariaDB, read in code order
// from the (app, code) index: for app = ? AND code > ? MariaDB otherwise
// takes the index by app alone and filters the codes before the cursor
// one by one (70 ms for a page half-way through a million tasks, against
// 0.2 ms).
const tasksByCode = "xtimer_tasks FORCE INDEX (xtimer_tasks_app_code)"

// taskConds are ListTasks' conditions besides the text: the app, the
// keyset and the filters, on the columns of table alias t ("" for none).
func taskConds(t string, f TaskFilter, afterCode string) (string, []any) {
	conds, args := []string{t + "app = ?"}, []any{f.App}
	if afterCode != "" {
		conds, args = append(conds, t+"code > ?"), append(args, afterCode)
	}
	if f.Status != "" {
		conds, args = append(conds, t+"status = ?"), append(args, f.Status)
	}
	if f.Kind != "" {
		conds, args = append(conds, t+"kind = ?"), append(args, f.Kind)
	}
	return strings.Join(conds, " AND "), args
}

// searchMySQL is ListTasks with a text, on MySQL and MariaDB. It reads
// first the next denseWindow tasks in code order, checked with REGEXP:
// when the text is common, the page is among them. Otherwise it checks
// the candidates of the (app, code) index for the code prefix and of the
// FULLTEXT index for the words, both few when the text is rare; a text
// without a word the index holds is checked on every task of the app.
func searchMySQL(db *gorm.DB, f TaskFilter, afterCode string, limit int) ([]Task, error) {
	re := wordStartRegexp(f.Text)
	conds, args := taskConds("", f, afterCode)
	window, wargs := taskConds("", TaskFilter{App: f.App}, afterCode)
	filters, fargs := taskConds("t.", TaskFilter{App: f.App, Status: f.Status, Kind: f.Kind}, "")
	page := fmt.Sprintf(" ORDER BY code LIMIT %d", limit+1)

	var out []Task
	err := db.Raw(fmt.Sprintf(`SELECT t.* FROM (SELECT id FROM `+tasksByCode+` WHERE %s ORDER BY code LIMIT %d) AS w
		JOIN xtimer_tasks t ON t.id = w.id WHERE %s AND (t.code REGEXP ? OR t.name REGEXP ?) ORDER BY t.code LIMIT %d`,
		window, denseWindow, filters, limit+1), append(append(wargs, fargs...), re, re)...).Scan(&out).Error
	if err != nil || len(out) > limit {
		return out, err
	}

	out = nil
	ft, ok := fulltextQuery(f.Text)
	if !ok {
		err = db.Raw("SELECT * FROM xtimer_tasks WHERE "+conds+" AND (code REGEXP ? OR name REGEXP ?)"+page,
			append(args, re, re)...).Scan(&out).Error
		return out, err
	}
	// The candidates in a derived table: MariaDB takes no LIMIT in an IN
	// subquery.
	var all []any
	all = append(all, args...)
	all = append(all, escapeLike(f.Text)+"%")
	all = append(all, args...)
	all = append(all, ft, re, re)
	err = db.Raw(`SELECT * FROM xtimer_tasks WHERE id IN (SELECT id FROM (
		(SELECT id FROM `+tasksByCode+` WHERE `+conds+` AND code LIKE ? ESCAPE '`+likeEscape+`'`+page+`)
		UNION
		(SELECT id FROM xtimer_tasks WHERE `+conds+` AND MATCH (code, name) AGAINST (? IN BOOLEAN MODE))
		) AS c) AND (code REGEXP ? OR name REGEXP ?)`+page, all...).Scan(&out).Error
	return out, err
}

// The search's indexes, which AutoMigrate cannot declare: trigram GIN
// indexes on PostgreSQL, a FULLTEXT index on MySQL and MariaDB.
//
// The name's trigram index is partial: most tasks' name is their code
// (Register without WithName), and a GIN entry per trigram of each such
// name doubled what a task row costs to insert for no search it serves
// (the code's index finds those tasks). It replaced xtimer_tasks_name_trgm,
// on every name (retiredIndexes).
const (
	trgmCodeIndex = "xtimer_tasks_code_trgm"
	trgmNameIndex = "xtimer_tasks_own_name_trgm"
	fulltextIndex = "xtimer_tasks_text"
)

// trgmIndexes are the trigram indexes: name, column, predicate.
var trgmIndexes = [][3]string{{trgmCodeIndex, "code", ""}, {trgmNameIndex, "name", " WHERE name <> code"}}

// migrateSearch creates the search's indexes when they are missing (a DBA
// may have made them from schema/). On PostgreSQL it first creates the
// pg_trgm extension, trusted since PostgreSQL 13 so that a database owner
// may; when that is refused, Migrate goes on without the indexes and logs
// a warning: the search works, by a scan of the app's tasks. It reports
// whether the indexes are there: not then, so that the next Migrate
// tries again.
func (s *Store) migrateSearch(db *gorm.DB) (bool, error) {
	m := db.Migrator()
	switch db.Dialector.Name() {
	case "postgres":
		if m.HasIndex(&Task{}, trgmCodeIndex) && m.HasIndex(&Task{}, trgmNameIndex) {
			return true, nil
		}
		schema, err := trgmSchema(db)
		if err != nil {
			s.log.Warn("xtimer: the PostgreSQL extension pg_trgm is missing and could not be created: "+
				"the console's task search scans the app's tasks instead of using trigram indexes; "+
				"run CREATE EXTENSION pg_trgm as a user allowed to, then restart a replica",
				"extension", "pg_trgm", "error", err)
			return false, nil
		}
		for _, idx := range trgmIndexes {
			if m.HasIndex(&Task{}, idx[0]) {
				continue
			}
			stmt := fmt.Sprintf("CREATE INDEX %s ON xtimer_tasks USING gin (lower(%s) %s.gin_trgm_ops)%s", idx[0], idx[1], quoteIdent(schema), idx[2])
			if err := db.Exec(stmt).Error; err != nil {
				return false, fmt.Errorf("store: migrate: create index %s: %w", idx[0], err)
			}
		}
	case "mysql":
		if m.HasIndex(&Task{}, fulltextIndex) {
			return true, nil
		}
		// Without stopwords, so that every word is found, "for" and "the"
		// too. The setting is read when the index is made; the migration's
		// one connection (Migrate) keeps it, and puts it back for the pool.
		if err := db.Exec("SET SESSION innodb_ft_enable_stopword = OFF").Error; err != nil {
			return false, fmt.Errorf("store: migrate: turn off stopwords for index %s: %w", fulltextIndex, err)
		}
		err := db.Exec("CREATE FULLTEXT INDEX " + fulltextIndex + " ON xtimer_tasks (code, name)").Error
		if resetErr := db.Exec("SET SESSION innodb_ft_enable_stopword = DEFAULT").Error; err == nil && resetErr != nil {
			err = resetErr
		}
		if err != nil {
			return false, fmt.Errorf("store: migrate: create index %s: %w", fulltextIndex, err)
		}
	}
	return true, nil
}

// trgmSchema returns the schema of the pg_trgm extension, creating it in
// the current schema when it is missing.
func trgmSchema(db *gorm.DB) (string, error) {
	var schema string
	find := `SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_trgm'`
	if err := db.Raw(find).Scan(&schema).Error; err != nil {
		return "", err
	}
	if schema != "" {
		return schema, nil
	}
	// Migrate's transaction goes on without the extension when a user may
	// not create it: the failed statement is rolled back to a savepoint,
	// not the transaction with it.
	if err := db.SavePoint("xtimer_pg_trgm").Error; err != nil {
		return "", err
	}
	if err := db.Exec("CREATE EXTENSION IF NOT EXISTS pg_trgm").Error; err != nil {
		if rbErr := db.RollbackTo("xtimer_pg_trgm").Error; rbErr != nil {
			return "", errors.Join(err, rbErr)
		}
		return "", err
	}
	if err := db.Raw(find).Scan(&schema).Error; err != nil {
		return "", err
	}
	return schema, nil
}

// quoteIdent quotes a PostgreSQL identifier.
func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
