package demo

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// maxExpr bounds an expression's length and nesting.
const (
	maxExpr  = 1024
	maxDepth = 64
)

// arithmeticError is an error of a well-formed expression: division by
// zero, a non-finite result.
type arithmeticError string

func (e arithmeticError) Error() string { return string(e) }

// Evaluate computes an arithmetic expression: numbers, + - * / % ^,
// parentheses and unary minus, with the usual precedence (^ binds tightest
// and is right-associative). Division by zero and non-finite results are
// errors.
func Evaluate(expr string) (float64, error) {
	if len(expr) > maxExpr {
		return 0, fmt.Errorf("expression longer than %d bytes", maxExpr)
	}
	p := &parser{src: expr}
	v, err := p.sum()
	if err != nil {
		return 0, err
	}
	p.space()
	if p.pos < len(p.src) {
		return 0, fmt.Errorf("unexpected %q at offset %d", p.src[p.pos:p.pos+1], p.pos)
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, arithmeticError("result is not a finite number")
	}
	return v, nil
}

type parser struct {
	src   string
	pos   int
	depth int
}

func (p *parser) space() {
	for p.pos < len(p.src) && (p.src[p.pos] == ' ' || p.src[p.pos] == '\t') {
		p.pos++
	}
}

func (p *parser) peek() byte {
	p.space()
	if p.pos < len(p.src) {
		return p.src[p.pos]
	}
	return 0
}

func (p *parser) sum() (float64, error) {
	v, err := p.product()
	for err == nil {
		op := p.peek()
		if op != '+' && op != '-' {
			return v, nil
		}
		p.pos++
		var r float64
		if r, err = p.product(); err == nil {
			if op == '+' {
				v += r
			} else {
				v -= r
			}
		}
	}
	return 0, err
}

func (p *parser) product() (float64, error) {
	v, err := p.power()
	for err == nil {
		op := p.peek()
		if op != '*' && op != '/' && op != '%' {
			return v, nil
		}
		p.pos++
		var r float64
		if r, err = p.power(); err != nil {
			break
		}
		switch {
		case op == '*':
			v *= r
		case r == 0:
			return 0, arithmeticError("division by zero")
		case op == '/':
			v /= r
		default:
			v = math.Mod(v, r)
		}
	}
	return 0, err
}

func (p *parser) power() (float64, error) {
	base, err := p.unary()
	if err != nil || p.peek() != '^' {
		return base, err
	}
	p.pos++
	exp, err := p.power() // right-associative
	if err != nil {
		return 0, err
	}
	return math.Pow(base, exp), nil
}

func (p *parser) unary() (float64, error) {
	if p.depth++; p.depth > maxDepth {
		return 0, errors.New("expression nested too deeply")
	}
	defer func() { p.depth-- }()
	switch p.peek() {
	case '-':
		p.pos++
		v, err := p.unary()
		return -v, err
	case '+':
		p.pos++
		return p.unary()
	case '(':
		p.pos++
		v, err := p.sum()
		if err != nil {
			return 0, err
		}
		if p.peek() != ')' {
			return 0, fmt.Errorf("missing ) at offset %d", p.pos)
		}
		p.pos++
		return v, nil
	}
	return p.number()
}

func (p *parser) number() (float64, error) {
	p.space()
	start := p.pos
	for p.pos < len(p.src) && (p.src[p.pos] >= '0' && p.src[p.pos] <= '9' || p.src[p.pos] == '.') {
		p.pos++
	}
	if start == p.pos {
		if p.pos >= len(p.src) {
			return 0, errors.New("unexpected end of expression")
		}
		return 0, fmt.Errorf("unexpected %q at offset %d", p.src[p.pos:p.pos+1], p.pos)
	}
	v, err := strconv.ParseFloat(p.src[start:p.pos], 64)
	if err != nil {
		return 0, fmt.Errorf("bad number %q", p.src[start:p.pos])
	}
	return v, nil
}

// FormatNumber prints v as people write it: integers without a fraction,
// other values to 12 significant digits.
func FormatNumber(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return strconv.FormatFloat(v, 'g', 12, 64)
}

// maxSearch bounds the stretch of text FindExpression searches (the
// search is cubic in its length).
const maxSearch = 256

// exprChars are the characters an arithmetic expression is written with
// (after normalise).
const exprChars = "0123456789.+-*/%^() \t"

// exprNormaliser rewrites the ways people write arithmetic in prose into
// the calculator's syntax: the multiplication and division signs, the
// Unicode minus, "**" for powers, and digit-group commas (1,234).
var exprNormaliser = strings.NewReplacer("×", "*", "⋅", "*", "·", "*", "÷", "/", "−", "-", "–", "-", "**", "^")

var (
	digitGroups = regexp.MustCompile(`(\d),(\d{3})\b`)
	timesX      = regexp.MustCompile(`([\d)])\s*[xX]\s*([\d(])`)
)

// FindExpression returns the arithmetic expression a text asks about, in
// the calculator's syntax, or "" when it holds none. Of the stretches of
// the text written only with numbers, operators and parentheses, it takes
// the longest part that evaluates and has an operator between two
// operands — so that "What is (12 + 30) * 2?" gives "(12 + 30) * 2", "2 ×
// 3" gives "2 * 3", and a lone number or a date-like "12:30" gives "".
func FindExpression(text string) string {
	s := exprNormaliser.Replace(text)
	for range 2 { // overlapping groups: 1,234,567
		s = digitGroups.ReplaceAllString(s, "$1$2")
	}
	s = timesX.ReplaceAllString(s, "$1 * $2")
	best := ""
	for _, run := range strings.FieldsFunc(s, func(r rune) bool { return !strings.ContainsRune(exprChars, r) }) {
		if c := longestExpression(run); len(c) > len(best) {
			best = c
		}
	}
	return best
}

// longestExpression returns the longest substring of run (a stretch of
// expression characters) that is an expression with an operator.
func longestExpression(run string) string {
	run = strings.TrimSpace(run)
	if len(run) > maxSearch {
		run = run[:maxSearch]
	}
	// Candidate bounds: an expression starts at a digit, "(", "-" or "."
	// and ends at a digit or ")".
	var starts, ends []int
	for i := 0; i < len(run); i++ {
		c := run[i]
		if c >= '0' && c <= '9' || c == '(' || c == '-' || c == '.' {
			starts = append(starts, i)
		}
		if c >= '0' && c <= '9' || c == ')' { // not ".": the end of a sentence
			ends = append(ends, i+1)
		}
	}
	best := ""
	for _, i := range starts {
		for k := len(ends) - 1; k >= 0 && ends[k]-i > len(best); k-- {
			cand := run[i:ends[k]]
			if hasOperator(cand) {
				var ae arithmeticError
				if _, err := Evaluate(cand); err == nil || errors.As(err, &ae) {
					best = cand
					break
				}
			}
		}
	}
	return best
}

// hasOperator reports whether expr has a binary operator: one that
// follows an operand (a digit, "." or ")").
func hasOperator(expr string) bool {
	prev := byte(0)
	for i := 0; i < len(expr); i++ {
		c := expr[i]
		if c == ' ' || c == '\t' {
			continue
		}
		if strings.IndexByte("+-*/%^", c) >= 0 && (prev >= '0' && prev <= '9' || prev == '.' || prev == ')') {
			return true
		}
		prev = c
	}
	return false
}
