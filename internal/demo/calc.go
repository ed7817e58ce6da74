package demo

import (
	"errors"
	"fmt"
	"math"
	"strconv"
)

// maxExpr bounds an expression's length and nesting.
const (
	maxExpr  = 1024
	maxDepth = 64
)

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
		return 0, errors.New("result is not a finite number")
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
			return 0, errors.New("division by zero")
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
