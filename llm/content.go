package llm

import (
	"encoding/base64"
	"fmt"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// BlockType discriminates content blocks in their JSON form.
type BlockType string

// The UPP content block types (UPP-1.3 §6.5).
const (
	BlockText      BlockType = "text"
	BlockReasoning BlockType = "reasoning"
	BlockImage     BlockType = "image"
	BlockDocument  BlockType = "document"
	BlockAudio     BlockType = "audio"
	BlockVideo     BlockType = "video"
	BlockBinary    BlockType = "binary"
)

// ContentBlock is one block of message content. It is implemented by
// TextBlock, ReasoningBlock, ImageBlock, DocumentBlock, AudioBlock,
// VideoBlock and BinaryBlock, and by nothing else.
//
// Every ContentBlock is also an Input: a text block becomes a user message
// with that text, any other block a user message holding just that block.
type ContentBlock interface {
	Input
	BlockType() BlockType
}

// TextBlock is plain text.
type TextBlock struct {
	Text string
}

// ReasoningBlock is the model's reasoning ("thinking"). Vendor data needed to
// send it back (signatures, encrypted content) lives in the message metadata
// under the provider's name.
type ReasoningBlock struct {
	Text string
}

// SourceType discriminates image and document sources.
type SourceType string

// Image and document source variants (UPP-1.3 §6.5). Images use base64, url
// and bytes; documents use base64, url and text.
const (
	SourceBase64 SourceType = "base64"
	SourceURL    SourceType = "url"
	SourceBytes  SourceType = "bytes"
	SourceText   SourceType = "text"
)

// Source is where an image's or document's data comes from.
//
//	base64: Data holds base64 text
//	url:    URL holds the address
//	bytes:  Bytes holds the raw data
//	text:   Data holds plain text (documents only)
type Source struct {
	Type  SourceType
	Data  string
	URL   string
	Bytes []byte
}

// Base64 returns the source's data as standard base64 text, for the base64
// and bytes variants; ok is false for url and text sources.
func (s Source) Base64() (data string, ok bool) {
	switch s.Type {
	case SourceBase64:
		return s.Data, true
	case SourceBytes:
		return base64.StdEncoding.EncodeToString(s.Bytes), true
	}
	return "", false
}

// Raw returns the source's data as bytes for the base64, bytes and text
// variants; ok is false for url sources and undecodable base64.
func (s Source) Raw() (data []byte, ok bool) {
	switch s.Type {
	case SourceBytes:
		return s.Bytes, true
	case SourceText:
		return []byte(s.Data), true
	case SourceBase64:
		b, err := base64.StdEncoding.DecodeString(s.Data)
		return b, err == nil
	}
	return nil, false
}

// ImageBlock is an image. Width and Height are 0 when unknown.
type ImageBlock struct {
	Source   Source
	MimeType string
	Width    int
	Height   int
}

// DocumentBlock is a document (PDF, plain text…).
type DocumentBlock struct {
	Source   Source
	MimeType string
	Title    string
}

// AudioBlock is audio data. Duration is 0 when unknown.
type AudioBlock struct {
	Data     []byte
	MimeType string
	Duration time.Duration
}

// VideoBlock is video data.
type VideoBlock struct {
	Data     []byte
	MimeType string
	Duration time.Duration
	Width    int
	Height   int
}

// BinaryBlock is arbitrary binary data (user content only).
type BinaryBlock struct {
	Data     []byte
	MimeType string
	Metadata map[string]any
}

// BlockType reports BlockText.
func (TextBlock) BlockType() BlockType { return BlockText }

// BlockType reports BlockReasoning.
func (ReasoningBlock) BlockType() BlockType { return BlockReasoning }

// BlockType reports BlockImage.
func (ImageBlock) BlockType() BlockType { return BlockImage }

// BlockType reports BlockDocument.
func (DocumentBlock) BlockType() BlockType { return BlockDocument }

// BlockType reports BlockAudio.
func (AudioBlock) BlockType() BlockType { return BlockAudio }

// BlockType reports BlockVideo.
func (VideoBlock) BlockType() BlockType { return BlockVideo }

// BlockType reports BlockBinary.
func (BinaryBlock) BlockType() BlockType { return BlockBinary }

func (TextBlock) isInput()      {}
func (ReasoningBlock) isInput() {}
func (ImageBlock) isInput()     {}
func (DocumentBlock) isInput()  {}
func (AudioBlock) isInput()     {}
func (VideoBlock) isInput()     {}
func (BinaryBlock) isInput()    {}

// Text returns a TextBlock; it is the usual way to pass a prompt:
//
//	turn, err := model.Generate(ctx, nil, llm.Text("Hello"))
func Text(s string) TextBlock { return TextBlock{Text: s} }

// ImageFromURL returns an image referenced by URL. mimeType may be empty.
func ImageFromURL(url, mimeType string) ImageBlock {
	return ImageBlock{Source: Source{Type: SourceURL, URL: url}, MimeType: mimeType}
}

// ImageFromBytes returns an image holding data.
func ImageFromBytes(data []byte, mimeType string) ImageBlock {
	return ImageBlock{Source: Source{Type: SourceBytes, Bytes: data}, MimeType: mimeType}
}

// ImageFromBase64 returns an image holding base64 data.
func ImageFromBase64(b64, mimeType string) ImageBlock {
	return ImageBlock{Source: Source{Type: SourceBase64, Data: b64}, MimeType: mimeType}
}

// ImageFromPath reads an image file; the MIME type comes from the file's
// extension, else from its first bytes.
func ImageFromPath(path string) (ImageBlock, error) {
	data, mt, err := readMedia(path)
	if err != nil {
		return ImageBlock{}, err
	}
	if !strings.HasPrefix(mt, "image/") {
		return ImageBlock{}, fmt.Errorf("llm: %s is %s, not an image", path, mt)
	}
	return ImageFromBytes(data, mt), nil
}

// DocumentFromText returns a plain-text document.
func DocumentFromText(text, title string) DocumentBlock {
	return DocumentBlock{Source: Source{Type: SourceText, Data: text}, MimeType: "text/plain", Title: title}
}

// DocumentFromURL returns a document referenced by URL (PDF unless the
// provider learns otherwise).
func DocumentFromURL(url, title string) DocumentBlock {
	return DocumentBlock{Source: Source{Type: SourceURL, URL: url}, MimeType: "application/pdf", Title: title}
}

// DocumentFromBase64 returns a document holding base64 data.
func DocumentFromBase64(b64, mimeType, title string) DocumentBlock {
	return DocumentBlock{Source: Source{Type: SourceBase64, Data: b64}, MimeType: mimeType, Title: title}
}

// DocumentFromPath reads a document file: text files become text sources,
// anything else (PDF) base64.
func DocumentFromPath(path, title string) (DocumentBlock, error) {
	data, mt, err := readMedia(path)
	if err != nil {
		return DocumentBlock{}, err
	}
	if strings.HasPrefix(mt, "text/") {
		d := DocumentFromText(string(data), title)
		d.MimeType = mt
		return d, nil
	}
	return DocumentFromBase64(base64.StdEncoding.EncodeToString(data), mt, title), nil
}

// AudioFromBytes returns an audio block.
func AudioFromBytes(data []byte, mimeType string) AudioBlock {
	return AudioBlock{Data: data, MimeType: mimeType}
}

// VideoFromBytes returns a video block.
func VideoFromBytes(data []byte, mimeType string) VideoBlock {
	return VideoBlock{Data: data, MimeType: mimeType}
}

// AudioFromPath reads an audio file.
func AudioFromPath(path string) (AudioBlock, error) {
	data, mt, err := readMedia(path)
	if err != nil {
		return AudioBlock{}, err
	}
	return AudioFromBytes(data, mt), nil
}

// VideoFromPath reads a video file.
func VideoFromPath(path string) (VideoBlock, error) {
	data, mt, err := readMedia(path)
	if err != nil {
		return VideoBlock{}, err
	}
	return VideoFromBytes(data, mt), nil
}

func readMedia(path string) ([]byte, string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("llm: %w", err)
	}
	mt := mime.TypeByExtension(filepath.Ext(path))
	if mt == "" {
		mt = http.DetectContentType(data)
	}
	if i := strings.IndexByte(mt, ';'); i >= 0 {
		mt = strings.TrimSpace(mt[:i])
	}
	return data, mt, nil
}
