package memory

import (
	"strings"
	"unicode"
)

// maxTerms bounds a recall query: a long message recalls by its first words.
const maxTerms = 24

// Terms turns a message into full-text query terms: its words, lowercased,
// without common words; long words become prefix terms that also match
// other forms of the word ("allergic" → "allerg*" matches "allergy",
// "peanuts" → "peanu*" matches "peanut"). This crude stemming works the same
// in every language that separates words with spaces, which a stemmer for
// one language would not.
func Terms(text string) []string {
	var out []string
	seen := map[string]bool{}
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	}) {
		r := []rune(w)
		if len(r) < 3 || stopwords[w] {
			continue
		}
		t := w
		switch {
		case len(r) >= 6:
			t = string(r[:len(r)-2]) + "*"
		case len(r) >= 4 && r[len(r)-1] == 's':
			t = string(r[:len(r)-1]) + "*"
		case len(r) >= 4:
			t = w + "*"
		}
		if seen[t] {
			continue
		}
		seen[t] = true
		out = append(out, t)
		if len(out) == maxTerms {
			break
		}
	}
	return out
}

// stopwords are words too common to say what a message is about (English,
// and the commonest of a few other languages).
var stopwords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`
		the and for are but not you your yours all any can had has have her hers him his how its our ours out
		she was were who why what when where which with would could should will shall may might must this that
		these those there their theirs they them then than too very just also about above after again against
		because been before being below between both did does doing down during each few from further here
		into more most once only other over own same some such through under until while whom yes now off
		let get got make made like want know think please thanks thank tell give take tomorrow today yesterday
		hello hey okay sure really maybe something anything nothing everything someone anyone one two
		der die das und ist nicht ein eine mit für auf den dem des ich sie wir ihr was wie wer
		les des est une pour pas que qui dans sur avec vous nous
		los las por para con una que del como
	`) {
		m[w] = true
	}
	return m
}()
