package store

import (
	"context"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// The full-text index of memories in both dialects.
//
// SQLite: memories_fts is an FTS4 table with the unicode61 tokenizer
// (remove_diacritics=1); MATCH takes "a OR b*", and matchinfo gives, per
// query term, the rows it hits, from which matchScore computes the score.
//
// Postgres: memories_fts (the migration's FTS4 table, rewritten by
// dialect.ddl) holds each active memory's lexemes as a tsvector with a GIN
// index. The lexemes are made here, in Go, the way unicode61 makes its
// tokens: runs of letters and digits, case and diacritics folded. They go in
// verbatim (array_to_tsvector: no parser, no stemming, no stop words), and a
// query term becomes a tsquery lexeme, 'word' or 'prefix':* for word*, so
// both backends match the same memories. The score is the same formula over
// the same counts: each query term a memory contains adds ln(1 + n/df), n the
// active memories and df those the term hits.

const (
	sqlFTSInsertPostgres = `INSERT INTO memories_fts (docid, text) VALUES (?, array_to_tsvector(CAST(? AS text[])))`
	// q: the query terms; hits: (memory, term) pairs over all owners, as
	// matchinfo counts them; df: memories per term.
	sqlMemSearchPostgres = `WITH q AS (
			SELECT t.ord, CAST(t.q AS tsquery) AS q FROM unnest(CAST(? AS text[])) WITH ORDINALITY AS t (q, ord)),
		hits AS (SELECT f.docid, q.ord FROM memories_fts f JOIN q ON f.text @@ q.q),
		df AS (SELECT ord, COUNT(*) AS n FROM hits GROUP BY ord)
		SELECT ` + sqlMemCols + `, (SELECT COUNT(*) FROM memories_fts), string_agg(CAST(df.n AS text), ',')
		FROM hits JOIN df ON df.ord = hits.ord JOIN memories m ON m.id = hits.docid
		WHERE m.superseded_by IS NULL AND ` + sqlMemOwned + `
		GROUP BY m.id`
)

// ftsInsert indexes an active memory's text.
func ftsInsert(ctx context.Context, tx conn, id int64, text string) error {
	var err error
	if tx.d.postgres {
		_, err = tx.ExecContext(ctx, sqlFTSInsertPostgres, id, memoryLexemes(text))
	} else {
		_, err = tx.ExecContext(ctx, sqlFTSInsert, id, text)
	}
	return err
}

// ftsTerms are the usable query terms, lowercased, sorted and without
// duplicates: letters and digits, optionally ending in * for a prefix match.
func ftsTerms(terms []string) []string {
	var parts []string
	for _, t := range terms {
		word := strings.TrimSuffix(t, "*")
		if word == "" || strings.ContainsFunc(word, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
			continue
		}
		parts = append(parts, strings.ToLower(t))
	}
	slices.Sort(parts)
	return slices.Compact(parts)
}

// ftsQuery ORs the usable terms into an FTS4 MATCH expression.
func ftsQuery(terms []string) string { return strings.Join(ftsTerms(terms), " OR ") }

// tsQueries turns usable terms into tsquery texts: 'word' or 'prefix':*.
func tsQueries(terms []string) []string {
	out := make([]string, 0, len(terms))
	for _, t := range terms {
		word, prefix := strings.CutSuffix(t, "*")
		q := "'" + foldToken(word) + "'"
		if prefix {
			q += ":*"
		}
		out = append(out, q)
	}
	return out
}

// memoryLexemes splits text into unicode61's tokens, folded: never nil.
func memoryLexemes(text string) []string {
	out := []string{}
	for tok := range strings.FieldsFuncSeq(text, func(r rune) bool { return !isTokenRune(r) }) {
		if f := foldToken(tok); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// isTokenRune: unicode61 keeps letters, numbers, private-use characters and
// combining marks (the diacritics it then removes) in tokens.
func isTokenRune(r rune) bool {
	return unicode.In(r, unicode.L, unicode.N, unicode.Mn, unicode.Co)
}

// foldToken lowercases and removes diacritics as unicode61 with
// remove_diacritics=1 does: "München" and "MUNCHEN" both become "munchen".
// Like SQLite's table, it folds only a Latin letter with one diacritic to
// its ASCII base ("ǖ", with two, and "で" stay as they are) and drops
// combining diacritical marks (U+0300–U+036F).
func foldToken(tok string) string {
	var b strings.Builder
	for _, r := range tok {
		r = unicode.ToLower(r)
		switch d := []rune(norm.NFD.String(string(r))); {
		case isCombiningDiacritic(r):
			continue
		case len(d) == 2 && d[0] < unicode.MaxASCII && unicode.IsLetter(d[0]) && isCombiningDiacritic(d[1]):
			r = d[0]
		}
		b.WriteRune(r)
	}
	return b.String()
}

func isCombiningDiacritic(r rune) bool { return r >= 0x300 && r <= 0x36f }

// searchPostgres finds the active memories the owners may see that contain
// any of terms (from ftsTerms), with Score the terms' weights.
func (s *Store) searchPostgres(ctx context.Context, user, chat string, terms []string) ([]Memory, error) {
	rows, err := s.db.QueryContext(ctx, sqlMemSearchPostgres, tsQueries(terms), user, chat)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Memory
	for rows.Next() {
		var n int64
		var dfs string
		m, err := scanMemory(rows, &n, &dfs)
		if err != nil {
			return nil, err
		}
		for df := range strings.SplitSeq(dfs, ",") {
			if k, err := strconv.ParseFloat(df, 64); err == nil && k > 0 {
				m.Score += math.Log1p(float64(n) / k)
			}
		}
		out = append(out, m)
	}
	return out, rows.Err()
}
