" Transcripts of convo sessions (:ConvoShow).
if exists('b:current_syntax')
  finish
endif
syntax match convoTitle /^# .*/
syntax match convoAbout /\%2l.*/
syntax match convoRole /^## .*/ contains=convoMark
syntax match convoCall /^▸ .*/ contains=convoMark
syntax match convoMark /\[\(cancelled\|pending\|no result\|partial: [a-z_?]*\|streaming\)\]/ contained
highlight default link convoTitle Title
highlight default link convoAbout Comment
highlight default link convoRole Statement
highlight default link convoCall Function
highlight default link convoMark WarningMsg
let b:current_syntax = 'convo'
