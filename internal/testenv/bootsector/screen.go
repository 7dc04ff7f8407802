package bootsector

import (
	"fmt"
	"image/color"
)

// The screen variant: before it prints, the boot sector switches the BIOS's VGA card to
// mode 13h (320x200, 256 colours, one byte a pixel at A000:0000) and fills the screen
// with one palette colour, so that a test reading the VM's screen (a screendump, or the
// full-screen window of the course-VM player) knows the VM's display is what it sees.
// Assembled by hand as Sector is:
//
//	7c00  31 c0       xor  ax, ax
//	7c02  8e d8       mov  ds, ax
//	7c04  8e d0       mov  ss, ax         ; a stack below the boot sector for the BIOS
//	7c06  bc 00 7c    mov  sp, 0x7c00
//	7c09  b8 13 00    mov  ax, 0x0013     ; int 10h AH=00 set video mode, AL=13h
//	7c0c  cd 10       int  0x10
//	7c0e  b8 00 a0    mov  ax, 0xa000     ; the mode's frame buffer
//	7c11  8e c0       mov  es, ax
//	7c13  31 ff       xor  di, di
//	7c15  b9 00 fa    mov  cx, 64000      ; 320 x 200 pixels
//	7c18  b0 CC       mov  al, COLOUR
//	7c1a  fc          cld
//	7c1b  f3 aa       rep  stosb          ; es:[di++] = al, cx times
//	7c1d  be 2f 7c    mov  si, msg        ; 0x7c2f
//	7c20  ba f8 03    mov  dx, 0x3f8      ; COM1, as Sector
//	7c23  ac          next: lodsb
//	7c24  84 c0       test al, al
//	7c26  74 03       jz   done
//	7c28  ee          out  dx, al
//	7c29  eb f8       jmp  next
//	7c2b  fa          done: cli           ; no interrupt wakes the halt
//	7c2c  f4          hlt
//	7c2d  eb fd       jmp  hlt
//	7c2f  msg, 0
//	7dfe  55 aa       boot signature
var screenCode = []byte{
	0x31, 0xc0, 0x8e, 0xd8, 0x8e, 0xd0, 0xbc, 0x00, 0x7c,
	0xb8, 0x13, 0x00, 0xcd, 0x10,
	0xb8, 0x00, 0xa0, 0x8e, 0xc0, 0x31, 0xff, 0xb9, 0x00, 0xfa,
	0xb0, 0x00, // COLOUR at colourAt
	0xfc, 0xf3, 0xaa,
	0xbe, 0x2f, 0x7c, 0xba, 0xf8, 0x03,
	0xac, 0x84, 0xc0, 0x74, 0x03, 0xee, 0xeb, 0xf8,
	0xfa, 0xf4, 0xeb, 0xfd,
}

// colourAt is the offset of the fill colour's byte in screenCode.
const colourAt = 0x19

// Red is palette colour 4 of the VGA BIOS's default palette in mode 13h.
const Red byte = 4

// palette is the default VGA palette's first 16 entries (the EGA colours) as the DAC
// holds them, 6 bits a channel: 0x2a is two thirds, 0x15 one third, 0x3f full.
var palette = [16][3]byte{
	{0, 0, 0}, {0, 0, 0x2a}, {0, 0x2a, 0}, {0, 0x2a, 0x2a}, {0x2a, 0, 0}, {0x2a, 0, 0x2a}, {0x2a, 0x15, 0}, {0x2a, 0x2a, 0x2a},
	{0x15, 0x15, 0x15}, {0x15, 0x15, 0x3f}, {0x15, 0x3f, 0x15}, {0x15, 0x3f, 0x3f}, {0x3f, 0x15, 0x15}, {0x3f, 0x15, 0x3f}, {0x3f, 0x3f, 0x15}, {0x3f, 0x3f, 0x3f},
}

// RGB is the colour a screendump of QEMU's VGA shows for palette colour c (0-15) of the
// default palette: QEMU widens each 6-bit DAC value v to 8 bits as v<<2, plus v's low
// bit twice (vga.c's c6_to_8), so red (0x2a, 0, 0) is (0xa8, 0, 0): within a few steps
// of the 0xaa a VGA palette table lists, so compare with a tolerance.
func RGB(c byte) color.RGBA {
	if int(c) >= len(palette) {
		panic(fmt.Sprintf("bootsector: palette colour %d: only the first 16 are known", c))
	}
	w := func(v byte) uint8 { b := v & 1; return v<<2 | b<<1 | b }
	p := palette[c]
	return color.RGBA{w(p[0]), w(p[1]), w(p[2]), 0xff}
}

// ScreenSector is the 512-byte boot sector that fills the screen with palette colour
// colour in mode 13h, then prints msg (at most 400 bytes, no NUL) on COM1 and halts.
func ScreenSector(msg string, colour byte) []byte {
	if len(msg) > 400 {
		panic(fmt.Sprintf("bootsector: message of %d bytes", len(msg)))
	}
	s := make([]byte, 512)
	copy(s, screenCode)
	s[colourAt] = colour
	copy(s[len(screenCode):], msg)
	s[510], s[511] = 0x55, 0xaa
	return s
}

// ScreenDisk is a raw disk of size bytes (a multiple of 512, at least 512) starting with
// ScreenSector(msg, colour), zeros after it.
func ScreenDisk(msg string, colour byte, size int) []byte {
	if size < 512 || size%512 != 0 {
		panic("bootsector: disk size must be a positive multiple of 512")
	}
	d := make([]byte, size)
	copy(d, ScreenSector(msg, colour))
	return d
}
